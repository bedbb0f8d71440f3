//! Feeds arbitrary bytes to the GGUF reader: it must return Ok or a typed
//! Err, and a successful parse must yield in-bounds tensor views.
#![no_main]

use libfuzzer_sys::fuzz_target;
use minfer_gguf::GgufFile;

fuzz_target!(|data: &[u8]| {
    if let Ok(f) = GgufFile::from_bytes(data.to_vec()) {
        for t in f.tensors() {
            assert_eq!(f.tensor_data(t).len() as u64, t.info.n_bytes);
        }
        for (_, v) in f.metadata().iter() {
            let _ = v.to_string();
        }
    }
});
