// Activation reads shared through the subgroup (for devices whose
// subgroups have at least 8 invocations): every lane of a product kernel
// needs the same activation words, so lane l of a subgroup loads word l
// and the words are broadcast. This cuts the loads of a software device
// (one per lane, whatever the address) by up to 8, and it reads the same
// words the plain version (act_plain.wgsl) reads, so the results match it
// bit for bit.

struct Inv {
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
    @builtin(subgroup_invocation_id) sl: u32,
}

// Words a[base .. base + 8), in every lane.
fn act8(inv: Inv, base: u32) -> array<u32, 8> {
    let v = a[base + (inv.sl & 7u)];
    return array<u32, 8>(
        subgroupBroadcast(v, 0u),
        subgroupBroadcast(v, 1u),
        subgroupBroadcast(v, 2u),
        subgroupBroadcast(v, 3u),
        subgroupBroadcast(v, 4u),
        subgroupBroadcast(v, 5u),
        subgroupBroadcast(v, 6u),
        subgroupBroadcast(v, 7u),
    );
}

// Words a[base] and a[base + 1], in every lane.
fn act2(inv: Inv, base: u32) -> vec2<u32> {
    let v = a[base + (inv.sl & 1u)];
    return vec2<u32>(subgroupBroadcast(v, 0u), subgroupBroadcast(v, 1u));
}
