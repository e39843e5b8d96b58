// SPDX-License-Identifier: MIT OR GPL-2.0
/*
 * llrouter's fast latency sink: an XDP program on the sink's interface that timestamps every
 * probe on arrival (bpf_ktime_get_ns() = CLOCK_MONOTONIC, the generator's clock), keeps
 * per-class latency histograms and counters and per-flow sequence state in maps, and drops the
 * frame. Anything that is not a probe (ARP, ND, other UDP ports) goes to the kernel (XDP_PASS).
 *
 * Probe: Ethernet (no VLAN) + IPv4 (no options) or IPv6 (no extension headers) + UDP to one of
 * the configured ports (sink_ports[port] != 0; all ports if sink_cfg.any_port) + the 22-byte
 * llr_core::probe header (magic "LP", version 1).
 *
 * Histogram: log-linear, 32 sub-buckets per power of two. Latencies below 32 ns are exact;
 * above, a bucket spans 1/32 of its power of two (relative resolution 3.1 %).
 *   idx = v                              for v < 32
 *   idx = (e - 4) * 32 + ((v >> (e - 5)) & 31)   with e = floor(log2 v) >= 5
 *
 * Per-class state is per-CPU (summed by user space). Per-flow state is a plain array updated
 * without atomics: correct while one CPU at a time runs the program for a flow, which holds on
 * a veth (one NAPI instance per receive queue, the sink's veth has one).
 */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#define SINK_CLASSES 4
#define SINK_BUCKETS 1920
#define SINK_MAX_FLOWS 4096

struct sink_cfg {
	__u32 any_port;
	__u32 pad;
};

/* Per class (per CPU): count, sum of latencies, min, max, negative latencies. */
struct class_stat {
	__u64 count;
	__u64 sum_ns;
	__u64 min_ns;
	__u64 max_ns;
	__u64 negative;
	__u64 first_ns;
	__u64 last_ns;
	__u64 pad;
};

/* Per flow: packets, highest seq + 1, packets that arrived below the highest seq. */
struct flow_stat {
	__u64 received;
	__u64 next;
	__u64 late;
	__u64 class;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct sink_cfg);
} sink_config SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 65536);
	__type(key, __u32);
	__type(value, __u8);
} sink_ports SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, SINK_CLASSES);
	__type(key, __u32);
	__type(value, struct class_stat);
} sink_class SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, SINK_CLASSES * SINK_BUCKETS);
	__type(key, __u32);
	__type(value, __u64);
} sink_hist SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, SINK_MAX_FLOWS);
	__type(key, __u32);
	__type(value, struct flow_stat);
} sink_flow SEC(".maps");

/* [0] invalid probes (right port, bad magic/version/length), [1] flows >= SINK_MAX_FLOWS,
 * [2] class >= SINK_CLASSES. Per CPU. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 4);
	__type(key, __u32);
	__type(value, __u64);
} sink_err SEC(".maps");

static __always_inline void err(__u32 k)
{
	__u64 *c = bpf_map_lookup_elem(&sink_err, &k);
	if (c)
		*c += 1;
}

static __always_inline __u32 log2_u64(__u64 v)
{
	__u32 r = 0;
	if (v >> 32) { v >>= 32; r += 32; }
	if (v >> 16) { v >>= 16; r += 16; }
	if (v >> 8) { v >>= 8; r += 8; }
	if (v >> 4) { v >>= 4; r += 4; }
	if (v >> 2) { v >>= 2; r += 2; }
	if (v >> 1) { r += 1; }
	return r;
}

static __always_inline __u32 bucket(__u64 v)
{
	if (v < 32)
		return (__u32)v;
	__u32 e = log2_u64(v);
	return (e - 4) * 32 + (__u32)((v >> (e - 5)) & 31);
}

SEC("xdp")
int llr_sink(struct xdp_md *ctx)
{
	__u64 now = bpf_ktime_get_ns();
	__u8 *data = (void *)(long)ctx->data;
	__u8 *end = (void *)(long)ctx->data_end;
	__u8 *l4;

	if (data + 14 > end)
		return XDP_PASS;
	__u16 proto = *(__u16 *)(data + 12);
	if (proto == bpf_htons(ETH_P_IP)) {
		__u8 *ip = data + 14;
		if (ip + 20 > end)
			return XDP_PASS;
		if (ip[0] != 0x45 || ip[9] != IPPROTO_UDP)
			return XDP_PASS;
		/* fragments go to the kernel */
		if (*(__u16 *)(ip + 6) & bpf_htons(0x3fff))
			return XDP_PASS;
		l4 = ip + 20;
	} else if (proto == bpf_htons(ETH_P_IPV6)) {
		__u8 *ip = data + 14;
		if (ip + 40 > end)
			return XDP_PASS;
		if (ip[6] != IPPROTO_UDP)
			return XDP_PASS;
		l4 = ip + 40;
	} else {
		return XDP_PASS;
	}
	if (l4 + 8 + 22 > end)
		return XDP_PASS;
	__u32 zero = 0;
	struct sink_cfg *cfg = bpf_map_lookup_elem(&sink_config, &zero);
	if (!cfg)
		return XDP_PASS;
	__u32 dport = bpf_ntohs(*(__u16 *)(l4 + 2));
	if (!cfg->any_port) {
		__u8 *on = bpf_map_lookup_elem(&sink_ports, &dport);
		if (!on || !*on)
			return XDP_PASS;
	}
	__u8 *p = l4 + 8;
	if (p[0] != 'L' || p[1] != 'P' || p[2] != 1) {
		err(0);
		return XDP_DROP;
	}
	__u32 class = p[3];
	__u16 flow16;
	__u64 seq, ts;
	__builtin_memcpy(&flow16, p + 4, 2);
	__builtin_memcpy(&seq, p + 6, 8);
	__builtin_memcpy(&ts, p + 14, 8);
	__u32 flow = flow16;
	if (class >= SINK_CLASSES) {
		err(2);
		return XDP_DROP;
	}

	struct class_stat *cs = bpf_map_lookup_elem(&sink_class, &class);
	if (!cs)
		return XDP_DROP;
	__u64 lat;
	if (now >= ts) {
		lat = now - ts;
	} else {
		lat = 0;
		cs->negative += 1;
	}
	if (cs->count == 0 || lat < cs->min_ns)
		cs->min_ns = lat;
	if (lat > cs->max_ns)
		cs->max_ns = lat;
	if (cs->first_ns == 0)
		cs->first_ns = now;
	cs->last_ns = now;
	cs->count += 1;
	cs->sum_ns += lat;
	__u32 hk = class * SINK_BUCKETS + bucket(lat);
	__u64 *h = bpf_map_lookup_elem(&sink_hist, &hk);
	if (h)
		*h += 1;

	if (flow >= SINK_MAX_FLOWS) {
		err(1);
		return XDP_DROP;
	}
	struct flow_stat *fs = bpf_map_lookup_elem(&sink_flow, &flow);
	if (!fs)
		return XDP_DROP;
	fs->received += 1;
	fs->class = class;
	if (seq >= fs->next)
		fs->next = seq + 1;
	else
		fs->late += 1;
	return XDP_DROP;
}

char _license[] SEC("license") = "Dual MIT/GPL";
