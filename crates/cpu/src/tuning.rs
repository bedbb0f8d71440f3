//! The kernels' choices for a lone token's products (see
//! `minfer_kernels::packed::tuning`), measured once per machine, kernel
//! level, thread count and weight type, and kept: in the process, so that
//! a second model of a server measures nothing again, and in a file, so
//! that the next process on the same machine starts without measuring.
//!
//! The file is a cache, never an input the results depend on (every
//! choice gives the same bits): a line it cannot read is measured again,
//! and a file that cannot be written is only a missed saving.

use std::io::Write;
use std::path::Path;
use std::sync::Mutex;

use minfer_graph::{WeightId, WeightStore};
use minfer_kernels::packed::{OneRow, GROUP};
use minfer_kernels::pool::ThreadPool;
use minfer_kernels::{GgmlType, Kernels, Layout, MatRef};

/// What one measurement is for: `(machine, level, threads)`.
type Key = (String, String, usize);

/// One remembered choice: the machine it was measured on, the type, and
/// what was chosen.
type Entry = (Key, GgmlType, OneRow);

/// The choices measured in this process, per key and type.
static MEASURED: Mutex<Vec<Entry>> = Mutex::new(Vec::new());

/// What [`tune`] did, for the log.
#[derive(Debug, Default)]
pub struct Tuned {
    /// Types measured now.
    pub measured: Vec<GgmlType>,
    /// Types whose choice came from the process or the file.
    pub kept: Vec<GgmlType>,
    /// Why the file could not be written, when it could not.
    pub save_error: Option<std::io::Error>,
}

/// Weight bytes of one type that a measurement reads per pass at most:
/// past the last-level cache of the CPUs this runs on, so that it reads
/// memory as a decode step does, and short enough that measuring a type
/// takes about a tenth of a second.
const PROBE_BYTES: usize = 64 << 20;

/// `kernels` with the choices for a lone token's products over each type
/// of `weights`' interleaved matrices on `pool`: taken from this process's
/// earlier measurements or from `file`, else measured now on the model's
/// own matrices (and added to both).
pub fn tune(
    kernels: Kernels,
    pool: &ThreadPool,
    weights: &WeightStore,
    file: Option<&Path>,
) -> (Kernels, Tuned) {
    let key: Key = (machine(), kernels.level().to_string(), pool.n_threads());
    let probes = probes(weights);
    let mut tuning = kernels.tuning();
    let mut tuned = Tuned::default();
    let mut memo = MEASURED.lock().unwrap_or_else(|e| e.into_inner());
    // Read only when the process has not measured every type already.
    let mut file_entries: Option<Vec<Entry>> = None;
    for p in &probes {
        if tuned.kept.contains(&p.ty) || tuned.measured.contains(&p.ty) {
            continue;
        }
        let known = choice(&memo, &key, p.ty).or_else(|| {
            let entries =
                file_entries.get_or_insert_with(|| file.map(read_file).unwrap_or_default());
            let one = choice(entries, &key, p.ty)?;
            memo.push((key.clone(), p.ty, one));
            Some(one)
        });
        match known {
            Some(one) => {
                tuning.set_one_row(p.ty, one);
                tuned.kept.push(p.ty);
            }
            None => tuned.measured.push(p.ty),
        }
    }
    if !tuned.measured.is_empty() {
        let missing: Vec<MatRef> = probes
            .into_iter()
            .filter(|p| tuned.measured.contains(&p.ty))
            .collect();
        let found = kernels.measure_tuning(pool, &missing);
        let entries = file_entries.get_or_insert_with(Vec::new);
        for &ty in &tuned.measured {
            let one = found.one_row(ty);
            tuning.set_one_row(ty, one);
            memo.push((key.clone(), ty, one));
            entries.push((key.clone(), ty, one));
        }
        if let Some(path) = file {
            tuned.save_error = write_file(path, entries).err();
        }
    }
    (kernels.with_tuning(tuning), tuned)
}

/// The interleaved matrices of `weights`, per type at most
/// [`PROBE_BYTES`] of them (the last one cut to its first groups of rows,
/// which is itself an interleaved matrix).
fn probes(weights: &WeightStore) -> Vec<MatRef<'_>> {
    let mut out: Vec<MatRef> = Vec::new();
    let mut bytes: Vec<(GgmlType, usize)> = Vec::new();
    for i in 0..weights.len() {
        let id = WeightId(i as u32);
        let Some(data) = weights.packed(id) else {
            continue;
        };
        let info = weights.info(id);
        let [cols, rows] = info.shape;
        let n = match bytes.iter_mut().find(|(t, _)| *t == info.ty) {
            Some((_, n)) => n,
            None => {
                bytes.push((info.ty, 0));
                &mut bytes.last_mut().expect("just pushed").1
            }
        };
        let groups = rows / GROUP;
        if *n >= PROBE_BYTES || groups == 0 {
            continue;
        }
        let per_group = data.len() / groups;
        let take = groups.min((PROBE_BYTES - *n).div_ceil(per_group.max(1)));
        *n += take * per_group;
        out.push(MatRef {
            ty: info.ty,
            rows: take * GROUP,
            cols,
            data: &data[..take * per_group],
            layout: Layout::Packed,
        });
    }
    out
}

/// The choice `entries` remember for `ty` on `key`'s machine, if any.
fn choice(entries: &[Entry], key: &Key, ty: GgmlType) -> Option<OneRow> {
    entries
        .iter()
        .find(|(k, t, _)| k == key && *t == ty)
        .map(|e| e.2)
}

/// The CPU as its identity matters here: vendor, family, model, stepping
/// and name (a VM may hide the name but not the rest).
fn machine() -> String {
    static MACHINE: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    MACHINE.get_or_init(read_machine).clone()
}

/// [`machine`], read from `/proc/cpuinfo`.
fn read_machine() -> String {
    let info = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let field = |name: &str| {
        info.lines()
            .find(|l| l.split(':').next().map(str::trim) == Some(name))
            .and_then(|l| l.split_once(':'))
            .map_or(String::new(), |(_, v)| v.trim().replace(['\t', ' '], "_"))
    };
    let id = ["vendor_id", "cpu family", "model", "stepping", "model name"]
        .map(field)
        .join("/");
    if id.chars().all(|c| c == '/') {
        format!("{}-unknown", std::env::consts::ARCH)
    } else {
        id
    }
}

/// The file's lines: `machine level threads type ahead_kib narrow`,
/// tab-separated; lines that do not parse are skipped.
fn read_file(path: &Path) -> Vec<Entry> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    text.lines()
        .filter_map(|line| {
            let f: Vec<&str> = line.split('\t').collect();
            let [machine, level, threads, ty, ahead, narrow] = f[..] else {
                return None;
            };
            let ty = GgmlType::ALL.iter().copied().find(|t| t.name() == ty)?;
            let one = OneRow {
                ahead_kib: ahead.parse().ok()?,
                narrow: narrow.parse().ok()?,
            };
            Some((
                (machine.into(), level.into(), threads.parse().ok()?),
                ty,
                one,
            ))
        })
        .collect()
}

/// Writes `entries` to `path` whole: a temporary file beside it, then a
/// rename, so that a reader never sees half a file.
fn write_file(path: &Path, entries: &[Entry]) -> std::io::Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let tmp = path.with_extension(format!("tmp{}", std::process::id()));
    let mut f = std::fs::File::create(&tmp)?;
    for ((machine, level, threads), ty, one) in entries {
        writeln!(
            f,
            "{machine}\t{level}\t{threads}\t{}\t{}\t{}",
            ty.name(),
            one.ahead_kib,
            one.narrow
        )?;
    }
    f.sync_all()?;
    std::fs::rename(&tmp, path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_file_round_trips_and_skips_what_it_cannot_read() {
        let dir = std::env::temp_dir().join(format!("minfer-tuning-{}", std::process::id()));
        let path = dir.join("kernel-tuning.tsv");
        let key: Key = ("m".into(), "avx2".into(), 2);
        let one = OneRow {
            ahead_kib: 8,
            narrow: true,
        };
        write_file(&path, &[(key.clone(), GgmlType::Q6_K, one)]).unwrap();
        let mut text = std::fs::read_to_string(&path).unwrap();
        text.push_str("garbage line\nm\tavx2\t2\tNOPE\t8\ttrue\n");
        std::fs::write(&path, text).unwrap();
        assert_eq!(read_file(&path), vec![(key, GgmlType::Q6_K, one)]);
        assert!(read_file(&dir.join("absent")).is_empty());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
