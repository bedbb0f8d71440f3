// Activation reads, every lane loading what it needs (devices without
// subgroups of at least 8 invocations; see act_sg.wgsl).

struct Inv {
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
}

// Words a[base .. base + 8).
fn act8(inv: Inv, base: u32) -> array<u32, 8> {
    return array<u32, 8>(
        a[base],
        a[base + 1u],
        a[base + 2u],
        a[base + 3u],
        a[base + 4u],
        a[base + 5u],
        a[base + 6u],
        a[base + 7u],
    );
}

// Words a[base] and a[base + 1].
fn act2(inv: Inv, base: u32) -> vec2<u32> {
    return vec2<u32>(a[base], a[base + 1u]);
}
