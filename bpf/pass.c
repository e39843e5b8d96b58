// SPDX-License-Identifier: MIT OR GPL-2.0
/*
 * The `kernel-xdp` testbed target's program: passes every frame to the kernel. It exists so
 * that the kernel forwards under the same link conditions as llrouter: a veth whose peer has an
 * XDP program loses its software segmentation offload (veth_fix_features), so the sender hands
 * the link MTU-sized frames instead of 64 KB GSO aggregates. Frags-aware, so that jumbo MTUs
 * are allowed on the link too.
 */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

SEC("xdp.frags")
int llr_pass(struct xdp_md *ctx)
{
	return XDP_PASS;
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";
