#[test]
fn probe() {
    for a in minfer_gpu::list_adapters() { eprintln!("{a:?}"); }
    let g = minfer_gpu::Gpu::open(minfer_gpu::AdapterChoice::Any).unwrap();
    let k = g.kernel("t", "@group(0) @binding(0) var<uniform> p: vec4<u32>; @group(0) @binding(1) var<storage, read_write> o: array<f32>; @compute @workgroup_size(64) fn main(@builtin(global_invocation_id) i: vec3<u32>) { if (i.x < p.x) { o[i.x] = f32(i.x) * 2.0; } }").unwrap();
    let b = g.storage("o", 400).unwrap();
    g.run(&[minfer_gpu::Dispatch{kernel:k, params: vec![100], buffers: vec![minfer_gpu::BufRange::whole(&b)], groups:[2,1,1]}]).unwrap();
    let v = g.read_f32(&b, 100).unwrap();
    assert_eq!(v[99], 198.0);
}
