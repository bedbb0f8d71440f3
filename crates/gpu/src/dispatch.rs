//! What a [`Gpu`] does with kernels: compiles them (once per name),
//! makes buffers, binds dispatches, submits them and reads results back.

use std::sync::Arc;

use crate::context::Gpu;
use crate::error::{GpuError, Result};
use crate::kernel::{Bound, Dispatch, Kernel};

impl Gpu {
    /// Compiles `wgsl` (entry point `main`) as kernel `name`, or returns
    /// the one compiled before under that name.
    ///
    /// # Errors
    /// [`GpuError::Shader`] when the shader does not validate.
    pub fn kernel(&self, name: &'static str, wgsl: &str) -> Result<Arc<Kernel>> {
        self.kernel_with(name, || wgsl.to_string())
    }

    /// [`Gpu::kernel`] for a kernel whose name and source are made at run
    /// time (variants of one shader): `wgsl` is called, and the name
    /// kept, only when the kernel is first compiled.
    ///
    /// # Errors
    /// [`GpuError::Shader`] when the shader does not validate.
    pub(crate) fn kernel_with(
        &self,
        name: &str,
        wgsl: impl FnOnce() -> String,
    ) -> Result<Arc<Kernel>> {
        let mut map = self
            .kernels
            .kernels
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        if let Some(k) = map.get(name) {
            return Ok(k.clone());
        }
        // One name per distinct kernel, for the life of the device.
        let name: &'static str = Box::leak(name.to_string().into_boxed_str());
        let wgsl = wgsl();
        let scope = self.device.push_error_scope(wgpu::ErrorFilter::Validation);
        let module = self
            .device
            .create_shader_module(wgpu::ShaderModuleDescriptor {
                label: Some(name),
                source: wgpu::ShaderSource::Wgsl(wgsl.as_str().into()),
            });
        let pipeline = self
            .device
            .create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
                label: Some(name),
                layout: None,
                module: &module,
                entry_point: Some("main"),
                compilation_options: Default::default(),
                cache: None,
            });
        if let Some(e) = pollster::block_on(scope.pop()) {
            return Err(GpuError::Shader {
                name,
                msg: e.to_string(),
            });
        }
        let layout = pipeline.get_bind_group_layout(0);
        let k = Arc::new(Kernel {
            name,
            pipeline,
            layout,
        });
        map.insert(name, k.clone());
        Ok(k)
    }

    /// A storage buffer of `bytes` (rounded up to 16), zeroed.
    ///
    /// # Errors
    /// [`GpuError::Buffer`] past the device's largest buffer.
    pub fn storage(&self, what: &str, bytes: u64) -> Result<Arc<wgpu::Buffer>> {
        let size = bytes.max(16).div_ceil(16) * 16;
        if size > self.limits.max_buffer_size {
            return Err(GpuError::Buffer {
                what: what.to_string(),
                msg: format!(
                    "{size} bytes, the device's largest buffer is {}",
                    self.limits.max_buffer_size
                ),
            });
        }
        Ok(Arc::new(self.device.create_buffer(
            &wgpu::BufferDescriptor {
                label: Some(what),
                size,
                usage: wgpu::BufferUsages::STORAGE
                    | wgpu::BufferUsages::COPY_DST
                    | wgpu::BufferUsages::COPY_SRC,
                mapped_at_creation: false,
            },
        )))
    }

    /// Writes `data` at byte `offset` of `buf` (queued; ordered before the
    /// next submission).
    pub fn write(&self, buf: &wgpu::Buffer, offset: u64, data: &[u8]) {
        // wgpu requires a multiple of 4 bytes; pad the tail with zeros.
        if data.len().is_multiple_of(4) {
            self.queue.write_buffer(buf, offset, data);
        } else {
            let mut v = data.to_vec();
            v.resize(data.len().div_ceil(4) * 4, 0);
            self.queue.write_buffer(buf, offset, &v);
        }
    }

    /// Binds `d`: its uniform block and storage ranges in one bind group.
    ///
    /// # Errors
    /// [`GpuError::Shader`] when the bindings do not fit the kernel.
    pub fn bind(&self, d: &Dispatch) -> Result<Bound> {
        let mut words = d.params.clone();
        words.resize(d.params.len().div_ceil(4).max(1) * 4, 0);
        let uniform = self.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some(d.kernel.name),
            size: (words.len() * 4) as u64,
            usage: wgpu::BufferUsages::UNIFORM | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        self.queue
            .write_buffer(&uniform, 0, bytemuck::cast_slice(&words));
        let mut entries = vec![wgpu::BindGroupEntry {
            binding: 0,
            resource: uniform.as_entire_binding(),
        }];
        for (i, b) in d.buffers.iter().enumerate() {
            entries.push(wgpu::BindGroupEntry {
                binding: i as u32 + 1,
                resource: wgpu::BindingResource::Buffer(wgpu::BufferBinding {
                    buffer: &b.buffer,
                    offset: b.offset,
                    size: b.size.and_then(wgpu::BufferSize::new),
                }),
            });
        }
        let scope = self.device.push_error_scope(wgpu::ErrorFilter::Validation);
        let bind = self.device.create_bind_group(&wgpu::BindGroupDescriptor {
            label: Some(d.kernel.name),
            layout: &d.kernel.layout,
            entries: &entries,
        });
        if let Some(e) = pollster::block_on(scope.pop()) {
            return Err(GpuError::Shader {
                name: d.kernel.name,
                msg: e.to_string(),
            });
        }
        Ok(Bound {
            kernel: d.kernel.clone(),
            bind,
            groups: d.groups,
            _uniform: uniform,
        })
    }

    /// Records `bound` into one compute pass of `enc`, in order.
    pub fn encode(&self, enc: &mut wgpu::CommandEncoder, bound: &[Bound]) {
        let mut pass = enc.begin_compute_pass(&wgpu::ComputePassDescriptor {
            label: Some("minfer"),
            timestamp_writes: None,
        });
        for b in bound {
            pass.set_pipeline(&b.kernel.pipeline);
            pass.set_bind_group(0, &b.bind, &[]);
            pass.dispatch_workgroups(b.groups[0], b.groups[1], b.groups[2]);
        }
    }

    /// A new command encoder.
    pub fn encoder(&self) -> wgpu::CommandEncoder {
        self.device
            .create_command_encoder(&wgpu::CommandEncoderDescriptor {
                label: Some("minfer"),
            })
    }

    /// Submits `enc`.
    pub fn submit(&self, enc: wgpu::CommandEncoder) {
        self.queue.submit(std::iter::once(enc.finish()));
    }

    /// Binds, encodes and submits `dispatches`, then waits for them: the
    /// one-off path the op tests use.
    ///
    /// # Errors
    /// Binding errors; [`GpuError::Runtime`] when the device fails.
    pub fn run(&self, dispatches: &[Dispatch]) -> Result<()> {
        let bound = dispatches
            .iter()
            .map(|d| self.bind(d))
            .collect::<Result<Vec<_>>>()?;
        let mut enc = self.encoder();
        self.encode(&mut enc, &bound);
        self.submit(enc);
        self.wait()
    }

    /// Waits until every submitted command has finished.
    ///
    /// # Errors
    /// [`GpuError::Runtime`] when the device is lost.
    pub fn wait(&self) -> Result<()> {
        self.device
            .poll(wgpu::PollType::wait_indefinitely())
            .map(|_| ())
            .map_err(|e| GpuError::Runtime(e.to_string()))
    }

    /// Copies `bytes` bytes from `offset` of `buf` into `out` (waits).
    /// `staging` is a map-readable buffer of at least `bytes`, kept by the
    /// caller so that repeated reads allocate no device memory.
    ///
    /// # Errors
    /// [`GpuError::Runtime`] when mapping fails.
    pub fn read_into(
        &self,
        buf: &wgpu::Buffer,
        offset: u64,
        staging: &wgpu::Buffer,
        out: &mut [u8],
    ) -> Result<()> {
        let bytes = (out.len() as u64).div_ceil(4) * 4;
        let mut enc = self.encoder();
        enc.copy_buffer_to_buffer(buf, offset, staging, 0, bytes);
        self.submit(enc);
        let slice = staging.slice(..bytes);
        let (tx, rx) = std::sync::mpsc::channel();
        slice.map_async(wgpu::MapMode::Read, move |r| {
            let _ = tx.send(r);
        });
        self.wait()?;
        rx.recv()
            .map_err(|e| GpuError::Runtime(e.to_string()))?
            .map_err(|e| GpuError::Runtime(e.to_string()))?;
        {
            let view = slice
                .get_mapped_range()
                .map_err(|e| GpuError::Runtime(e.to_string()))?;
            out.copy_from_slice(&view[..out.len()]);
        }
        staging.unmap();
        Ok(())
    }

    /// A map-readable staging buffer of `bytes`.
    pub fn staging(&self, bytes: u64) -> wgpu::Buffer {
        self.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("minfer readback"),
            size: bytes.max(16).div_ceil(16) * 16,
            usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        })
    }

    /// Reads `bytes` bytes of `buf` from `offset` (a test helper: it makes
    /// a staging buffer each call).
    ///
    /// # Errors
    /// As [`Gpu::read_into`].
    pub fn read(&self, buf: &wgpu::Buffer, offset: u64, bytes: usize) -> Result<Vec<u8>> {
        let staging = self.staging(bytes as u64);
        let mut out = vec![0u8; bytes];
        self.read_into(buf, offset, &staging, &mut out)?;
        Ok(out)
    }

    /// Reads `n` f32 values from the start of `buf` (test helper).
    ///
    /// # Errors
    /// As [`Gpu::read_into`].
    pub fn read_f32(&self, buf: &wgpu::Buffer, n: usize) -> Result<Vec<f32>> {
        let b = self.read(buf, 0, n * 4)?;
        Ok(bytemuck::pod_collect_to_vec(&b))
    }

    /// A storage buffer holding `data` (test and upload helper).
    ///
    /// # Errors
    /// As [`Gpu::storage`].
    pub fn upload(&self, what: &str, data: &[u8]) -> Result<Arc<wgpu::Buffer>> {
        let b = self.storage(what, data.len() as u64)?;
        self.write(&b, 0, data);
        Ok(b)
    }
}
