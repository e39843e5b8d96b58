// SPDX-License-Identifier: MIT OR GPL-2.0
/*
 * llrouter's fast traffic generator: an XDP program run with BPF_PROG_RUN
 * (BPF_PROG_TEST_RUN) and BPF_F_TEST_XDP_LIVE_FRAMES, `repeat` times per syscall. Every run
 * turns the frame into one probe packet and redirects it into the generator's veth
 * (`gen_cfg.ifindex`), which hands it to the peer (the router's ingress).
 *
 * Live-frame pages are recycled without being reset, and whoever received a frame last may have
 * rewritten its headers (the kernel router decrements the TTL in place), so every run copies the
 * whole header template (Ethernet + IP + UDP + probe) into the frame and then patches it:
 *   - class: RT with probability rt_thresh / 2^32 (bpf_get_prandom_u32), else BE;
 *   - flow: uniform among the class's flows (flows 0..rt_flows-1 are RT, the rest BE: the UDP
 *     generator's convention, llr_io::gen::GenConfig::class_of);
 *   - per-flow sequence number from `gen_seq[flow]` (0, 1, 2, ... per flow: what the sink's
 *     SeqTracker expects);
 *   - UDP source port = sport_base + flow; probe flow id, seq, and the send timestamp
 *     bpf_ktime_get_ns() (= CLOCK_MONOTONIC, the sink's clock);
 *   - UDP checksum patched incrementally (RFC 1624) from the template's, which user space
 *     computes with source port, flow, seq and timestamp all zero. The IPv4 header checksum and
 *     DSCP (EF for RT) are part of the per-class templates, precomputed by user space.
 *
 * Maps are plain (not per-CPU) and updated without atomics: one generator thread runs the
 * program at a time (BPF_PROG_RUN runs it on the calling CPU, one frame after the other).
 */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

#define GEN_MAX_FLOWS 4096
#define TMPL_LEN 128

struct gen_cfg {
	__u32 ifindex;     /* redirect target (the generator's veth) */
	__u32 rt_thresh;   /* RT if prandom < rt_thresh */
	__u32 rt_flows;    /* flows 0..rt_flows-1 are RT */
	__u32 be_flows;    /* flows rt_flows..rt_flows+be_flows-1 are BE */
	__u32 all_rt;      /* 1: every packet is RT (rt_share = 1) */
	__u32 ipv6;        /* 0: IPv4 template, 1: IPv6 */
	__u32 sport_base;  /* UDP source port of flow 0 */
	__u32 pad;
};

struct tmpl {
	__u8 bytes[TMPL_LEN];
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct gen_cfg);
} gen_config SEC(".maps");

/* [0] = BE template, [1] = RT template. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 2);
	__type(key, __u32);
	__type(value, struct tmpl);
} gen_tmpl SEC(".maps");

/* Next sequence number per flow (= packets generated for it so far). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, GEN_MAX_FLOWS);
	__type(key, __u32);
	__type(value, __u64);
} gen_seq SEC(".maps");

/* Offsets for IPv4 (Ethernet 14 + IPv4 20) and IPv6 (14 + 40). */
#define L4_V4 34
#define L4_V6 54
#define HDR_V4 (L4_V4 + 8 + 22) /* 64 */
#define HDR_V6 (L4_V6 + 8 + 22) /* 84 */

static __always_inline __u32 add16(__u32 sum, const __u8 *p)
{
	return sum + *(const __u16 *)p;
}

static __always_inline int fill(struct xdp_md *ctx, const struct tmpl *t, __u32 l4, __u32 hdr,
				__u16 flow, __u16 sport, __u64 seq)
{
	__u8 *data = (void *)(long)ctx->data;
	__u8 *end = (void *)(long)ctx->data_end;

	if (hdr == HDR_V4) {
		if (data + HDR_V4 > end)
			return -1;
		__builtin_memcpy(data, t->bytes, HDR_V4);
	} else {
		if (data + HDR_V6 > end)
			return -1;
		__builtin_memcpy(data, t->bytes, HDR_V6);
	}
	__u8 *udp = data + l4;
	__u8 *probe = udp + 8;
	__u64 ts = bpf_ktime_get_ns();

	/* Big-endian source port. */
	udp[0] = sport >> 8;
	udp[1] = sport & 0xff;
	/* Probe: flow (LE u16), seq (LE u64), timestamp (LE u64); x86 and BPF are little endian. */
	__builtin_memcpy(probe + 4, &flow, 2);
	__builtin_memcpy(probe + 6, &seq, 8);
	__builtin_memcpy(probe + 14, &ts, 8);

	/* RFC 1624: the template's checksum covers zeros at every patched position. */
	__u16 old = *(__u16 *)(udp + 6);
	__u32 sum = (__u16)~old;
	sum = add16(sum, udp);
#pragma unroll
	for (int i = 4; i < 22; i += 2)
		sum = add16(sum, probe + i);
	sum = (sum & 0xffff) + (sum >> 16);
	sum = (sum & 0xffff) + (sum >> 16);
	__u16 c = ~(__u16)sum;
	if (c == 0)
		c = 0xffff;
	*(__u16 *)(udp + 6) = c;
	return 0;
}

SEC("xdp")
int llr_gen(struct xdp_md *ctx)
{
	__u32 zero = 0;
	struct gen_cfg *cfg = bpf_map_lookup_elem(&gen_config, &zero);
	if (!cfg)
		return XDP_PASS;
	/* User space also attaches this program (skb mode) to the egress interface only to keep it
	 * in the kernel's XDP dispatcher: otherwise every BPF_PROG_RUN adds and removes it, which
	 * costs two RCU grace periods (~10-20 ms here) per syscall. Frames really received there
	 * (ingress_ifindex = that interface; test runs see the loopback device) go to the kernel. */
	if (ctx->ingress_ifindex == cfg->ifindex)
		return XDP_PASS;

	__u32 r = bpf_get_prandom_u32();
	int rt = cfg->all_rt || r < cfg->rt_thresh;
	__u32 r2 = bpf_get_prandom_u32();
	__u32 flow;
	if (rt) {
		if (cfg->rt_flows == 0)
			return XDP_ABORTED;
		flow = r2 % cfg->rt_flows;
	} else {
		if (cfg->be_flows == 0)
			return XDP_ABORTED;
		flow = cfg->rt_flows + r2 % cfg->be_flows;
	}
	if (flow >= GEN_MAX_FLOWS)
		return XDP_ABORTED;

	__u32 k = rt ? 1 : 0;
	struct tmpl *t = bpf_map_lookup_elem(&gen_tmpl, &k);
	__u64 *seqp = bpf_map_lookup_elem(&gen_seq, &flow);
	if (!t || !seqp)
		return XDP_ABORTED;
	__u64 seq = *seqp;
	__u16 sport = (__u16)(cfg->sport_base + flow);
	int err;
	if (cfg->ipv6)
		err = fill(ctx, t, L4_V6, HDR_V6, (__u16)flow, sport, seq);
	else
		err = fill(ctx, t, L4_V4, HDR_V4, (__u16)flow, sport, seq);
	if (err)
		return XDP_ABORTED;
	*seqp = seq + 1;
	return bpf_redirect(cfg->ifindex, 0);
}

char _license[] SEC("license") = "Dual MIT/GPL";
