// SPDX-License-Identifier: MIT OR GPL-2.0
/*
 * llrouter's ingress classifier: sorts every frame into the AF_XDP socket ("Rx ring") of its
 * traffic class *before* the router's CPU spends time on it (paper 000, Fig. 2; the Flow
 * Director match set of the papers, done in XDP here).
 *
 * Per frame:
 *   - the headers are validated exactly as llr-core's `wire::parse_frame` does (runt,
 *     oversize > 9018 bytes, stacked or QinQ VLAN tags, truncated IP header, bad version, bad
 *     IHL, bad total/payload length, bad or too many IPv6 extension headers, TCP/UDP/SCTP header
 *     cut short); a frame failing any check is *malformed*: no L3 field matches a rule, and it
 *     goes through the rules with its L2 fields only (usually ending in the lowest class),
 *     where the user-space forwarder counts and drops it by reason;
 *   - a valid IP frame the host firewall's prerouting hook would drop, by a rule llr-core's
 *     `filter::xdp` found exact here, is dropped (XDP_DROP) and counted against that rule;
 *   - in a family whose host firewall reads connection state (CFG_CT_V4/6), a frame goes to
 *     the kernel unless it belongs to an established TCP or UDP connection user space put in
 *     `llr_ct` (from the kernel's conntrack table) and, for TCP, carries none of SYN, FIN, RST:
 *     the kernel sees every state change, as with an nftables flowtable;
 *   - of the valid frames, those not for us to forward go to the kernel (XDP_PASS): non-IP,
 *     multicast/broadcast MAC (checked first, for any frame), IPv6 multicast or link-local
 *     destination, an address of the router itself -- so ARP, ND and ping keep working. TTL /
 *     hop-limit expiry stays in its class ring: the worker answers it (ICMP time exceeded,
 *     rate-limited) in the class's share of the CPU, so a flood of expiring packets in the BE
 *     class cannot take the kernel's softirq time from the RT class;
 *   - otherwise the first matching rule of the active half of `llr_rules` gives the class
 *     (unmatched -> the lowest class, that half's `default_class`);
 *   - class -> ring via `llr_class_ring`; the XSKMAP key is (rx queue, ring):
 *     rx_queue_index * LLR_MAX_CLASSES + ring, so with several workers each queue's frames go
 *     to the sockets of the worker that owns the queue (AF_XDP only accepts a frame into a
 *     socket bound to the queue it arrived on); bpf_redirect_map() with XDP_PASS as the
 *     fallback (no socket bound for the key -> the kernel gets the frame);
 *   - with CFG_BY_QUEUE ("steering = queues" / "ntuple"), the class is not looked up in the
 *     rules at all: something before us (the NIC's ntuple filters, a switch, the testbed's
 *     generator) already put class c of worker w in hardware queue w * queue_classes + c, so
 *     class = rx_queue_index % queue_classes. The pass-to-kernel checks above still apply.
 *
 * The rule semantics are llr-core's `classify` module doc; crates/io/tests/classifier_agree.rs
 * checks this program against `RuleSet::classify` on generated rules and frames.
 *
 * `struct llr_rule` must match llr-core's `Rule::to_bpf_bytes()` byte for byte.
 *
 * Rule updates never expose a half-written rule: `llr_rules` holds two tables of LLR_MAX_RULES
 * slots. A frame reads `llr_config.active` once and uses that half only (its rules, and its
 * count and default class in `llr_sets[active]`). User space (crates/io/src/ebpf.rs) writes a
 * new rule set into the other half, then its `llr_sets` entry, then flips `active`; before it
 * overwrites a half again it waits for an RCU grace period after the flip that retired it, so
 * no frame is still reading it.
 */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#define LLR_MAX_RULES 64
#define LLR_MAX_CLASSES 64
/* rx queues a classifier can redirect from (XSKMAP keys: queue * LLR_MAX_CLASSES + ring) */
#define LLR_MAX_QUEUES 64
/* llr-core's wire::DEFAULT_MAX_FRAME and ipv6::MAX_EXT_HEADERS */
#define LLR_MAX_FRAME 9018
#define LLR_MAX_EXT 4
/* pre-standard QinQ TPID (llr-core: ethertype::QINQ_OLD) */
#define LLR_P_QINQ_OLD 0x9100

#define F_IFINDEX (1u << 0)
#define F_VLAN_ID (1u << 1)
#define F_VLAN_PCP (1u << 2)
#define F_PROTO (1u << 3)
#define F_DSCP (1u << 4)
#define F_SRC (1u << 5)
#define F_DST (1u << 6)
#define F_SPORT (1u << 7)
#define F_DPORT (1u << 8)
#define F_FLEX (1u << 9)
#define F_IPVER (1u << 10)

/* llr_config.flags */
#define CFG_TIMESTAMP (1u << 0) /* write bpf_ktime_get_ns() into 8 bytes of XDP metadata */
#define CFG_BY_QUEUE (1u << 1) /* class = rx queue % queue_classes; no rules */
/* The host's firewall has rules llrouter cannot evaluate: the kernel gets every valid frame of
 * the family on its own interface, where its netfilter hooks see the real iif. */
#define CFG_KERNEL_V4 (1u << 2)
#define CFG_KERNEL_V6 (1u << 3)
/* The drop tables of the family have prefixes (llr_drop_*): look them up. */
#define CFG_DROP_V4 (1u << 4)
#define CFG_DROP_V6 (1u << 5)
/* tagged-frames = "forward": 802.1Q-tagged frames are classified and routed, not passed */
#define CFG_TAGGED_FORWARD (1u << 6)
/* The family's firewall reads connection state: only frames of connections in llr_ct stay. */
#define CFG_CT_V4 (1u << 7)
#define CFG_CT_V6 (1u << 8)
/* The family's drop rules include ports or ICMP types (llr_drop_port*): look them up for frames
 * with ports and ICMP frames, and leave fragments, whose later pieces carry neither, to the
 * workers. */
#define CFG_DROP_PORTS_V4 (1u << 9)
#define CFG_DROP_PORTS_V6 (1u << 10)
/* The family's drop rules include protocols without a port (port table entries under pdir
 * LLR_ANY_PORT): look up every frame's protocol, fragments and portless frames included. */
#define CFG_DROP_PROTOS_V4 (1u << 11)
#define CFG_DROP_PROTOS_V6 (1u << 12)
#define LLR_ANY_PORT 2
/* pdir of an ICMP or ICMPv6 type (port [0, type]): llr-core's `filter::xdp::ICMP_TYPE`. */
#define LLR_ICMP_TYPE 3
#ifndef IPPROTO_ICMPV6 /* linux/in6.h, which this program needs nothing else from */
#define IPPROTO_ICMPV6 58
#endif

/* Counter slots of llr_stats after the per-class ones. */
#define ST_PASS_NONIP (LLR_MAX_CLASSES + 0)
#define ST_PASS_MCAST (LLR_MAX_CLASSES + 1)
#define ST_PASS_LOCAL (LLR_MAX_CLASSES + 2)
#define ST_PASS_FIREWALL (LLR_MAX_CLASSES + 3)
#define ST_MALFORMED (LLR_MAX_CLASSES + 4)
#define ST_NO_SOCKET (LLR_MAX_CLASSES + 5)
#define ST_RULE_HIT (LLR_MAX_CLASSES + 6)
#define ST_DROP_FIREWALL (LLR_MAX_CLASSES + 7)
/* then one counter per XSKMAP key (ring), for tests and per-ring accounting */
#define ST_PASS_VLAN (LLR_MAX_CLASSES + 8)
#define ST_KEY_BASE (LLR_MAX_CLASSES + 9)
/* then one `no socket` counter per rx queue, so that the warning names the unserved queue */
#define ST_NOSOCK_QUEUE_BASE (ST_KEY_BASE + LLR_MAX_CLASSES)
/* passed to the kernel: not a connection llrouter carries (CFG_CT_V4/6) */
#define ST_PASS_CT (ST_NOSOCK_QUEUE_BASE + LLR_MAX_QUEUES)
#define ST_SLOTS (ST_PASS_CT + 1)

struct llr_rule {
	__u32 fields;
	__u32 ifindex;
	__u16 vlan_id;
	__u8 vlan_pcp;
	__u8 proto;
	__u8 dscp;
	__u8 ip_version;
	__u8 klass;
	__u8 flex_off;
	__u16 flex_value;
	__u16 flex_mask;
	__u16 sport_lo;
	__u16 sport_hi;
	__u16 dport_lo;
	__u16 dport_hi;
	__u8 src[16];
	__u8 dst[16];
	__u8 src_plen;
	__u8 dst_plen;
	__u8 pad[2];
};
_Static_assert(sizeof(struct llr_rule) == 64, "struct llr_rule must be 64 bytes");

struct llr_config {
	__u32 active; /* the rule-table half frames use: 0 or 1 */
	__u32 queue_classes; /* with CFG_BY_QUEUE: classes per worker's queue group */
	__u32 flags;
	__u32 drop_gen; /* the generation of the drop tables frames use: 0 or 1 */
};

/* One per half of llr_rules. */
struct llr_set {
	__u32 nrules;
	__u32 default_class;
};

/* Two tables: slots [0, LLR_MAX_RULES) and [LLR_MAX_RULES, 2 * LLR_MAX_RULES). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 2 * LLR_MAX_RULES);
	__type(key, __u32);
	__type(value, struct llr_rule);
} llr_rules SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 2);
	__type(key, __u32);
	__type(value, struct llr_set);
} llr_sets SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct llr_config);
} llr_config SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, LLR_MAX_CLASSES);
	__type(key, __u32);
	__type(value, __u32);
} llr_class_ring SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_XSKMAP);
	__uint(max_entries, LLR_MAX_QUEUES * LLR_MAX_CLASSES);
	__type(key, __u32);
	__type(value, __u32);
} llr_xsks SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, ST_SLOTS);
	__type(key, __u32);
	__type(value, __u64);
} llr_stats SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 256);
	__type(key, __u32); /* IPv4 address, network order */
	__type(value, __u8);
} llr_local4 SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 256);
	__type(key, __u8[16]);
	__type(value, __u8);
} llr_local6 SEC(".maps");

/*
 * The host firewall's drops taken here (llr-core's `filter::xdp`): per family, a source and a
 * destination longest-prefix table of disjoint prefixes, each naming the rule (slot) that
 * drops. A frame found in both takes the lower slot, the rule the kernel meets first. The key
 * starts with a generation byte: user space writes the next generation's prefixes beside the
 * live ones, flips llr_config.drop_gen, and deletes the old ones after an RCU grace period, so
 * a frame sees one whole table. Per slot and generation, packets and bytes (IP length, as the
 * kernel's counters count) in llr_drop_stats.
 */
#define LLR_MAX_DROPS 256
#define LLR_MAX_DROP_PREFIXES (2 * 65536)

struct llr_drop4_key {
	__u32 prefixlen; /* 8 (generation) + the prefix's length */
	__u8 gen;
	__u8 addr[4];
	__u8 pad[3];
};

struct llr_drop6_key {
	__u32 prefixlen;
	__u8 gen;
	__u8 addr[16];
	__u8 pad[3];
};

struct llr_drop_count {
	__u64 packets;
	__u64 bytes;
};

#define DROP_TABLE(name, key_t, n)                                                               \
	struct {                                                                                 \
		__uint(type, BPF_MAP_TYPE_LPM_TRIE);                                             \
		__uint(max_entries, n);                                                          \
		__uint(map_flags, BPF_F_NO_PREALLOC);                                            \
		__type(key, key_t);                                                              \
		__type(value, __u32);                                                            \
	} name SEC(".maps")

/* The port table (llr-core's `filter::xdp::PortPrefix`): protocol, port direction (0 source,
 * 1 destination, LLR_ANY_PORT: a protocol match without a port, port 0; LLR_ICMP_TYPE: an
 * ICMP type, port [0, type]), port, address
 * direction, then the address prefix; a rule without an address has an entry in each address
 * direction with prefix length 0. prefixlen counts from `gen`. */
struct llr_drop_port4_key {
	__u32 prefixlen;
	__u8 gen;
	__u8 proto;
	__u8 pdir;
	__u8 port[2]; /* network order */
	__u8 adir;
	__u8 addr[4];
	__u8 pad[2];
};

struct llr_drop_port6_key {
	__u32 prefixlen;
	__u8 gen;
	__u8 proto;
	__u8 pdir;
	__u8 port[2];
	__u8 adir;
	__u8 addr[16];
	__u8 pad[2];
};

#define LLR_MAX_DROP_PORTS (2 * 65536)

DROP_TABLE(llr_drop_port4, struct llr_drop_port4_key, LLR_MAX_DROP_PORTS);
DROP_TABLE(llr_drop_port6, struct llr_drop_port6_key, LLR_MAX_DROP_PORTS);

DROP_TABLE(llr_drop_src4, struct llr_drop4_key, LLR_MAX_DROP_PREFIXES);
DROP_TABLE(llr_drop_dst4, struct llr_drop4_key, LLR_MAX_DROP_PREFIXES);
DROP_TABLE(llr_drop_src6, struct llr_drop6_key, LLR_MAX_DROP_PREFIXES);
DROP_TABLE(llr_drop_dst6, struct llr_drop6_key, LLR_MAX_DROP_PREFIXES);

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 2 * LLR_MAX_DROPS);
	__type(key, __u32);
	__type(value, struct llr_drop_count);
} llr_drop_stats SEC(".maps");

/*
 * The established connections llrouter carries, both directions of each, as user space
 * (llr-io's `conntrack`) learns them from the kernel's conntrack table. The value is when a
 * frame last took the entry (bpf_ktime_get_ns, refreshed at most every LLR_CT_TOUCH_NS): user
 * space extends the kernel entry's timeout for connections in use, since the kernel no longer
 * sees their packets.
 */
#define LLR_MAX_CT 262144
#define LLR_CT_TOUCH_NS 100000000ull

struct llr_ct_key {
	__u8 src[16]; /* IPv4: the first 4 bytes, the rest 0 */
	__u8 dst[16];
	__u16 sport; /* host order */
	__u16 dport;
	__u8 proto;
	__u8 ipver;
	__u8 pad[2];
};
_Static_assert(sizeof(struct llr_ct_key) == 40, "struct llr_ct_key must be 40 bytes");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, LLR_MAX_CT);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct llr_ct_key);
	__type(value, __u64);
} llr_ct SEC(".maps");

/* What the rules can look at. */
struct pkt {
	__u8 src[16];
	__u8 dst[16];
	__u16 vlan_id;
	__u16 sport;
	__u16 dport;
	__u8 has_vlan;
	__u8 pcp;
	__u8 ipver; /* 0: no (valid) IP header */
	__u8 proto;
	__u8 dscp;
	__u8 has_ports;
	__u8 tcpflags; /* TCP: byte 13 of the header; 0xff when not read */
	__u8 has_icmp; /* ICMP or ICMPv6 with its first 4 header bytes: icmp_type is read */
	__u8 icmp_type;
	__u32 ifindex; /* ctx->ingress_ifindex */
	__u32 flen;    /* frame length */
	__u8 head[64]; /* the first min(flen, 64) bytes, for flex matches */
};

static __always_inline void count(__u32 slot)
{
	__u64 *c = bpf_map_lookup_elem(&llr_stats, &slot);
	if (c)
		*c += 1;
}

static __always_inline int prefix_match(const __u8 *addr, const __u8 *pfx, __u32 plen)
{
#pragma unroll
	for (int i = 0; i < 16; i++) {
		if (plen >= 8) {
			if (addr[i] != pfx[i])
				return 0;
			plen -= 8;
		} else if (plen > 0) {
			__u8 m = (__u8)(0xff << (8 - plen));
			if ((addr[i] ^ pfx[i]) & m)
				return 0;
			plen = 0;
		}
	}
	return 1;
}

static __always_inline int rule_match(const struct llr_rule *r, const struct pkt *p)
{
	__u32 f = r->fields;

	if ((f & F_IFINDEX) && r->ifindex != p->ifindex)
		return 0;
	if ((f & F_VLAN_ID) && (!p->has_vlan || p->vlan_id != r->vlan_id))
		return 0;
	if ((f & F_VLAN_PCP) && (!p->has_vlan || p->pcp != r->vlan_pcp))
		return 0;
	if ((f & F_IPVER) && p->ipver != r->ip_version)
		return 0;
	if ((f & (F_IPVER | F_PROTO | F_DSCP | F_SRC | F_DST | F_SPORT | F_DPORT)) && !p->ipver)
		return 0;
	if ((f & F_PROTO) && p->proto != r->proto)
		return 0;
	if ((f & F_DSCP) && p->dscp != r->dscp)
		return 0;
	if (f & (F_SRC | F_DST)) {
		/* a prefix implies its IP version */
		if (p->ipver != r->ip_version)
			return 0;
		if ((f & F_SRC) && !prefix_match(p->src, r->src, r->src_plen > 128 ? 128 : r->src_plen))
			return 0;
		if ((f & F_DST) && !prefix_match(p->dst, r->dst, r->dst_plen > 128 ? 128 : r->dst_plen))
			return 0;
	}
	if ((f & (F_SPORT | F_DPORT)) && !p->has_ports)
		return 0;
	if ((f & F_SPORT) && (p->sport < r->sport_lo || p->sport > r->sport_hi))
		return 0;
	if ((f & F_DPORT) && (p->dport < r->dport_lo || p->dport > r->dport_hi))
		return 0;
	if (f & F_FLEX) {
		__u32 off = r->flex_off;
		if (off > 62 || off + 2 > p->flen)
			return 0;
		__u16 v = ((__u16)p->head[off] << 8) | p->head[off + 1];
		if ((v & r->flex_mask) != (r->flex_value & r->flex_mask))
			return 0;
	}
	return 1;
}

/* The first of the `nrules` rules from slot `base` on matching `p`, as its class; -1 if none.
 * A global (non-inlined) function: the verifier checks it once, not once per path of the header
 * parser that reaches it. */
__noinline int llr_match_rules(struct pkt *p, __u32 nrules, __u32 base)
{
	if (!p)
		return -1;
	for (__u32 i = 0; i < LLR_MAX_RULES; i++) {
		if (i >= nrules)
			break;
		__u32 k = base + i;
		struct llr_rule *r = bpf_map_lookup_elem(&llr_rules, &k);
		if (!r)
			break;
		if (rule_match(r, p))
			return r->klass;
	}
	return -1;
}

/* The lower of two slots found (~0: none). */
static __always_inline __u32 lower_slot(const __u32 *a, const __u32 *b)
{
	__u32 x = a ? *a : ~0u, y = b ? *b : ~0u;
	return x < y ? x : y;
}

/* Counts a drop of slot `slot` (~0: none) and says whether the frame is dropped. */
static __always_inline int fw_dropped(__u32 gen, __u32 slot, __u32 iplen)
{
	if (slot >= LLR_MAX_DROPS)
		return 0;
	__u32 k = gen * LLR_MAX_DROPS + slot;
	struct llr_drop_count *c = bpf_map_lookup_elem(&llr_drop_stats, &k);
	if (c) {
		c->packets += 1;
		c->bytes += iplen;
	}
	count(ST_DROP_FIREWALL);
	return 1;
}

/* The earliest rule of the port table for `key` (its protocol and port set) against each of
 * `p`'s addresses (~0: none). `key` is the family's key with `gen` set and `addr` sized `alen`. */
#define ADDR_LOOKUP(map, key, p, alen, best)                                                    \
	do {                                                                                     \
		_Pragma("unroll") for (int ad = 0; ad < 2; ad++)                                 \
		{                                                                                \
			key.adir = ad;                                                           \
			__builtin_memcpy(key.addr, ad ? (p)->dst : (p)->src, alen);              \
			__u32 *v = bpf_map_lookup_elem(&map, &key);                              \
			best = lower_slot(v, &best);                                             \
		}                                                                                \
	} while (0)

/* Each port of `p` against each address. */
#define PORT_LOOKUP(map, key, p, alen, best)                                                    \
	do {                                                                                     \
		key.proto = (p)->proto;                                                          \
		_Pragma("unroll") for (int pd = 0; pd < 2; pd++)                                 \
		{                                                                                \
			__u16 port = pd ? (p)->dport : (p)->sport;                               \
			key.pdir = pd;                                                           \
			key.port[0] = port >> 8;                                                 \
			key.port[1] = port & 0xff;                                               \
			ADDR_LOOKUP(map, key, p, alen, best);                                    \
		}                                                                                \
	} while (0)

/* `p`'s ICMP type (LLR_ICMP_TYPE, port [0, type]) against each address. */
#define ICMP_LOOKUP(map, key, p, alen, best)                                                    \
	do {                                                                                     \
		key.proto = (p)->proto;                                                          \
		key.pdir = LLR_ICMP_TYPE;                                                        \
		key.port[0] = 0;                                                                 \
		key.port[1] = (p)->icmp_type;                                                    \
		ADDR_LOOKUP(map, key, p, alen, best);                                            \
	} while (0)

/* `p`'s protocol alone (LLR_ANY_PORT, port 0) against each address. */
#define PROTO_LOOKUP(map, key, p, alen, best)                                                   \
	do {                                                                                     \
		key.proto = (p)->proto;                                                          \
		key.pdir = LLR_ANY_PORT;                                                         \
		key.port[0] = 0;                                                                 \
		key.port[1] = 0;                                                                 \
		ADDR_LOOKUP(map, key, p, alen, best);                                            \
	} while (0)

static __always_inline int fw_drop4(const struct pkt *p, __u32 gen, __u32 iplen, int ports,
				    int protos)
{
	struct llr_drop4_key k = {.prefixlen = 8 + 32, .gen = (__u8)gen};
	__builtin_memcpy(k.addr, p->src, 4);
	__u32 *s = bpf_map_lookup_elem(&llr_drop_src4, &k);
	__builtin_memcpy(k.addr, p->dst, 4);
	__u32 *d = bpf_map_lookup_elem(&llr_drop_dst4, &k);
	__u32 best = lower_slot(s, d);
	if (ports && p->has_ports) {
		struct llr_drop_port4_key pk = {.prefixlen = 48 + 32, .gen = (__u8)gen};
		PORT_LOOKUP(llr_drop_port4, pk, p, 4, best);
	}
	if (ports && p->has_icmp) {
		struct llr_drop_port4_key pk = {.prefixlen = 48 + 32, .gen = (__u8)gen};
		ICMP_LOOKUP(llr_drop_port4, pk, p, 4, best);
	}
	if (protos) {
		struct llr_drop_port4_key pk = {.prefixlen = 48 + 32, .gen = (__u8)gen};
		PROTO_LOOKUP(llr_drop_port4, pk, p, 4, best);
	}
	return fw_dropped(gen, best, iplen);
}

static __always_inline int fw_drop6(const struct pkt *p, __u32 gen, __u32 iplen, int ports,
				    int protos)
{
	struct llr_drop6_key k = {.prefixlen = 8 + 128, .gen = (__u8)gen};
	__builtin_memcpy(k.addr, p->src, 16);
	__u32 *s = bpf_map_lookup_elem(&llr_drop_src6, &k);
	__builtin_memcpy(k.addr, p->dst, 16);
	__u32 *d = bpf_map_lookup_elem(&llr_drop_dst6, &k);
	__u32 best = lower_slot(s, d);
	if (ports && p->has_ports) {
		struct llr_drop_port6_key pk = {.prefixlen = 48 + 128, .gen = (__u8)gen};
		PORT_LOOKUP(llr_drop_port6, pk, p, 16, best);
	}
	if (ports && p->has_icmp) {
		struct llr_drop_port6_key pk = {.prefixlen = 48 + 128, .gen = (__u8)gen};
		ICMP_LOOKUP(llr_drop_port6, pk, p, 16, best);
	}
	if (protos) {
		struct llr_drop_port6_key pk = {.prefixlen = 48 + 128, .gen = (__u8)gen};
		PROTO_LOOKUP(llr_drop_port6, pk, p, 16, best);
	}
	return fw_dropped(gen, best, iplen);
}

#define TCP_FIN 0x01
#define TCP_SYN 0x02
#define TCP_RST 0x04
#define TCP_ACK 0x10

/* Whether the frame belongs to a connection llrouter carries (see llr_ct). */
static __always_inline int ct_carried(const struct pkt *p)
{
	if (!p->has_ports || (p->proto != IPPROTO_TCP && p->proto != IPPROTO_UDP))
		return 0;
	/* conntrack's state machine sees these; ACK-less segments are ones it may call invalid */
	if (p->proto == IPPROTO_TCP &&
	    ((p->tcpflags & (TCP_SYN | TCP_FIN | TCP_RST)) || !(p->tcpflags & TCP_ACK)))
		return 0;
	struct llr_ct_key k = {};
	__builtin_memcpy(k.src, p->src, 16);
	__builtin_memcpy(k.dst, p->dst, 16);
	k.sport = p->sport;
	k.dport = p->dport;
	k.proto = p->proto;
	k.ipver = p->ipver;
	__u64 *seen = bpf_map_lookup_elem(&llr_ct, &k);
	if (!seen)
		return 0;
	__u64 now = bpf_ktime_get_ns();
	/* racy on purpose: any recent time will do, and one write per interval keeps the line
	 * shared between the CPUs that read it */
	if (now - *seen > LLR_CT_TOUCH_NS)
		*seen = now;
	return 1;
}

/* Fixed-header validation and the port fields, exactly as llr-core's `parse_frame`: on any
 * error the frame is "malformed" (no L3 field matches a rule) and goes through the rules with
 * its L2 fields only. The kernel gets only fully valid frames (see llr_classify). */
static __always_inline int l4_min(__u8 proto)
{
	return proto == IPPROTO_TCP ? 20 : proto == IPPROTO_UDP ? 8 : proto == IPPROTO_SCTP ? 12 : 0;
}

/* The protocols whose type the drop table reads (llr-core's `filter::xdp::ICMP_PROTOS`), in
 * either family as nft's `icmp type` / `icmpv6 type` do. */
static __always_inline int is_icmp(__u8 proto)
{
	return proto == IPPROTO_ICMP || proto == IPPROTO_ICMPV6;
}

/* The body of both programs below. */
static __always_inline int classify(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	struct pkt p = {};
	__u32 zero = 0;
	__u32 l3off = sizeof(struct ethhdr);
	__u32 cls;
	int malformed = 0;

	struct llr_config *cfg = bpf_map_lookup_elem(&llr_config, &zero);
	if (!cfg)
		return XDP_PASS;
	/* one read of the active half; everything about the rules comes from that half */
	__u32 half = *(volatile __u32 *)&cfg->active & 1;
	struct llr_set *set = bpf_map_lookup_elem(&llr_sets, &half);
	if (!set)
		return XDP_PASS;
	cls = set->default_class;
	__u32 nrules = set->nrules;
	/* The whole frame: a multi-buffer frame (the frags program) is longer than its linear
	 * part [data, data_end), which holds the headers that direct reads below look at. */
	__u64 flen = bpf_xdp_get_buff_len(ctx);

	if ((void *)(eth + 1) > data_end) {
		/* runt frame: no L2 fields either; flex and interface rules still apply */
		malformed = 1;
		goto rules;
	}
	if (eth->h_dest[0] & 1) {
		/* broadcast / multicast: ARP, ND, routing protocols -> the kernel */
		count(ST_PASS_MCAST);
		return XDP_PASS;
	}
	if (flen > LLR_MAX_FRAME)
		malformed = 1; /* oversize; the VLAN tag below still counts for rules */

	__u16 etype = bpf_ntohs(eth->h_proto);
	if (etype == ETH_P_8021AD || etype == LLR_P_QINQ_OLD) {
		/* an 802.1ad / QinQ outer tag counts as a stacked VLAN: never forwarded */
		malformed = 1;
		goto rules;
	}
	if (etype == ETH_P_8021Q) {
		__u8 *tag = (__u8 *)data + l3off;
		if ((void *)(tag + 4) > data_end) {
			malformed = 1; /* a tagged runt */
			goto rules;
		}
		__u16 inner = ((__u16)tag[2] << 8) | tag[3];
		if (inner == ETH_P_8021Q || inner == ETH_P_8021AD || inner == LLR_P_QINQ_OLD) {
			/* stacked VLANs: not forwarded, and no VLAN field matches (as in llr-core) */
			malformed = 1;
			goto rules;
		}
		__u16 tci = ((__u16)tag[0] << 8) | tag[1];
		p.has_vlan = 1;
		p.vlan_id = tci & 0x0fff;
		p.pcp = tci >> 13;
		etype = inner;
		l3off += 4;
	}
	if (malformed)
		goto rules;
	if (p.has_vlan && !(cfg->flags & CFG_TAGGED_FORWARD)) {
		/* The kernel's VLAN devices own tagged frames: one on this link for the VID routes
		 * it as the kernel's configuration says; with none the kernel drops it. llrouter
		 * serves untagged links only. */
		count(ST_PASS_VLAN);
		return XDP_PASS;
	}

	if (etype == ETH_P_IP) {
		__u8 *ip = (__u8 *)data + l3off;
		if ((void *)(ip + 20) > data_end || (ip[0] >> 4) != 4 || (ip[0] & 0xf) < 5) {
			malformed = 1; /* truncated, bad version, bad IHL */
			goto rules;
		}
		__u32 ihl = (ip[0] & 0xf) * 4;
		__u32 tot = ((__u32)ip[2] << 8) | ip[3];
		if ((void *)(ip + ihl) > data_end || tot < ihl || l3off + tot > flen) {
			malformed = 1; /* header past the frame, bad total length */
			goto rules;
		}
		__builtin_memcpy(p.src, ip + 12, 4);
		__builtin_memcpy(p.dst, ip + 16, 4);
		p.dscp = ip[1] >> 2;
		p.proto = ip[9];
		__u16 frag = (((__u16)ip[6] << 8) | ip[7]) & 0x3fff;
		__u32 min = l4_min(p.proto);
		if (!frag && min) {
			if (tot - ihl < min) {
				malformed = 1; /* L4 header cut short by the IP length */
				goto rules;
			}
			__u8 *l4 = ip + ihl;
			if ((void *)(l4 + 4) > data_end) {
				malformed = 1; /* (implied by the checks above; for the verifier) */
				goto rules;
			}
			p.has_ports = 1;
			p.sport = ((__u16)l4[0] << 8) | l4[1];
			p.dport = ((__u16)l4[2] << 8) | l4[3];
			p.tcpflags = 0xff;
			if (p.proto == IPPROTO_TCP && (void *)(l4 + 20) <= data_end)
				p.tcpflags = l4[13];
		}
		if (!frag && is_icmp(p.proto) && tot - ihl >= 4) {
			__u8 *l4 = ip + ihl;
			if ((void *)(l4 + 4) <= data_end) {
				p.has_icmp = 1;
				p.icmp_type = l4[0];
			}
		}
		p.ipver = 4;
		/* The kernel's prerouting hook drops these whatever follows: before the local,
		 * multicast and forwarding decisions. */
		/* With port drops, a fragment is left to the workers: its later pieces carry no
		 * ports, and the first must not be judged apart from them. */
		if ((cfg->flags & CFG_DROP_V4) && !(frag && (cfg->flags & CFG_DROP_PORTS_V4)) &&
		    fw_drop4(&p, cfg->drop_gen & 1, tot, cfg->flags & CFG_DROP_PORTS_V4,
			     cfg->flags & CFG_DROP_PROTOS_V4))
			return XDP_DROP;
		if (bpf_map_lookup_elem(&llr_local4, ip + 16)) {
			count(ST_PASS_LOCAL);
			return XDP_PASS;
		}
		if (cfg->flags & CFG_KERNEL_V4) {
			count(ST_PASS_FIREWALL);
			return XDP_PASS;
		}
		if ((cfg->flags & CFG_CT_V4) && !ct_carried(&p)) {
			count(ST_PASS_CT);
			return XDP_PASS;
		}
	} else if (etype == ETH_P_IPV6) {
		__u8 *ip6 = (__u8 *)data + l3off;
		if ((void *)(ip6 + 40) > data_end || (ip6[0] >> 4) != 6) {
			malformed = 1;
			goto rules;
		}
		__u32 plen = ((__u32)ip6[4] << 8) | ip6[5];
		__u8 nh = ip6[6];
		/* the payload must fit; payload length 0 (jumbogram) only with no next header */
		if (l3off + 40 + plen > flen || (plen == 0 && nh != 59)) {
			malformed = 1;
			goto rules;
		}
		__builtin_memcpy(p.src, ip6 + 8, 16);
		__builtin_memcpy(p.dst, ip6 + 24, 16);
		p.dscp = (((ip6[0] & 0x0f) << 4) | (ip6[1] >> 4)) >> 2;
		/* Extension headers: at most LLR_MAX_EXT (llr-core's MAX_EXT_HEADERS) of them, each
		 * inside the payload. */
		__u32 end = l3off + 40 + plen; /* <= flen <= LLR_MAX_FRAME */
		__u32 off = l3off + 40;
		int frag = 0, found = 0;
#pragma unroll
		for (int i = 0; i <= LLR_MAX_EXT; i++) {
			__u32 len;
			if (nh != 0 && nh != 43 && nh != 60 && nh != 44) {
				found = 1;
				break;
			}
			if (off > LLR_MAX_FRAME) /* bounds `off` for the verifier */
				break;
			__u8 *h = (__u8 *)data + off;
			if (nh == 44) {
				frag = 1;
				len = 8;
			} else {
				if (off + 2 > end || (void *)(h + 2) > data_end)
					break;
				len = ((__u32)h[1] + 1) * 8;
			}
			if (off + len > end || (void *)(h + 1) > data_end)
				break;
			nh = h[0];
			off += len;
		}
		if (!found) {
			malformed = 1; /* a header past the payload, or too long a chain */
			goto rules;
		}
		p.proto = nh;
		__u32 min = l4_min(nh);
		if (!frag && min) {
			if (end - off < min || off > LLR_MAX_FRAME) {
				malformed = 1;
				goto rules;
			}
			__u8 *l4 = (__u8 *)data + off;
			if ((void *)(l4 + 4) > data_end) {
				malformed = 1;
				goto rules;
			}
			p.has_ports = 1;
			p.sport = ((__u16)l4[0] << 8) | l4[1];
			p.dport = ((__u16)l4[2] << 8) | l4[3];
			p.tcpflags = 0xff;
			if (p.proto == IPPROTO_TCP && (void *)(l4 + 20) <= data_end)
				p.tcpflags = l4[13];
		}
		if (!frag && is_icmp(nh) && end - off >= 4 && off <= LLR_MAX_FRAME) {
			__u8 *l4 = (__u8 *)data + off;
			if ((void *)(l4 + 4) <= data_end) {
				p.has_icmp = 1;
				p.icmp_type = l4[0];
			}
		}
		p.ipver = 6;
		if ((cfg->flags & CFG_DROP_V6) && !(frag && (cfg->flags & CFG_DROP_PORTS_V6)) &&
		    fw_drop6(&p, cfg->drop_gen & 1, 40 + plen, cfg->flags & CFG_DROP_PORTS_V6,
			     cfg->flags & CFG_DROP_PROTOS_V6))
			return XDP_DROP;
		if (p.dst[0] == 0xff || (p.dst[0] == 0xfe && (p.dst[1] & 0xc0) == 0x80)) {
			count(ST_PASS_MCAST);
			return XDP_PASS;
		}
		if (bpf_map_lookup_elem(&llr_local6, p.dst)) {
			count(ST_PASS_LOCAL);
			return XDP_PASS;
		}
		if (cfg->flags & CFG_KERNEL_V6) {
			count(ST_PASS_FIREWALL);
			return XDP_PASS;
		}
		if ((cfg->flags & CFG_CT_V6) && !ct_carried(&p)) {
			count(ST_PASS_CT);
			return XDP_PASS;
		}
	} else {
		count(ST_PASS_NONIP);
		return XDP_PASS;
	}
rules:
	if (cfg->flags & CFG_BY_QUEUE) {
		__u32 n = cfg->queue_classes;
		cls = n ? ctx->rx_queue_index % n : 0;
		if (malformed)
			count(ST_MALFORMED);
		goto redirect;
	}
	if (malformed) {
		count(ST_MALFORMED);
		p.ipver = 0;
		p.has_ports = 0;
	}
	p.ifindex = ctx->ingress_ifindex;
	p.flen = (__u32)flen;
	if (flen > 0) {
		/* len - 1, masked after a compiler barrier, then + 1: the verifier sees [1, 64] in the
		 * very register passed to the helper. A range check that clang moves to a copy of
		 * the register is lost on kernels before ~6.13 (no tracking of linked registers with
		 * offsets), which then reject a possibly zero-sized read. */
		__u32 m = (flen < sizeof(p.head) ? (__u32)flen : (__u32)sizeof(p.head)) - 1;
		asm volatile("" : "+r"(m));
		m &= sizeof(p.head) - 1;
		bpf_xdp_load_bytes(ctx, 0, p.head, m + 1);
	}
	int m = llr_match_rules(&p, nrules, half * LLR_MAX_RULES);
	if (m >= 0) {
		cls = (__u32)m;
		count(ST_RULE_HIT);
	}

redirect:;
	__u32 c = cls & (LLR_MAX_CLASSES - 1);
	__u32 r = c;
	__u32 *ring = bpf_map_lookup_elem(&llr_class_ring, &c);
	if (ring)
		r = *ring & (LLR_MAX_CLASSES - 1);
	__u32 key = ctx->rx_queue_index * LLR_MAX_CLASSES + r;
	count(c);
	count(ST_KEY_BASE + r);
	if (cfg->flags & CFG_TIMESTAMP) {
		if (bpf_xdp_adjust_meta(ctx, -(int)sizeof(__u64)) == 0) {
			void *d = (void *)(long)ctx->data;
			__u64 *meta = (void *)(long)ctx->data_meta;
			if ((void *)(meta + 1) <= d)
				*meta = bpf_ktime_get_ns();
		}
	}
	long ret = bpf_redirect_map(&llr_xsks, key, XDP_PASS);
	if (ret != XDP_REDIRECT) {
		count(ST_NO_SOCKET);
		count(ST_NOSOCK_QUEUE_BASE + (ctx->rx_queue_index & (LLR_MAX_QUEUES - 1)));
	}
	return ret;
}

/* Frames in one buffer: the program for every MTU whose frames fit a UMEM chunk. */
SEC("xdp")
int llr_classify(struct xdp_md *ctx)
{
	return classify(ctx);
}

/* Frames in several buffers (jumbo MTUs, AF_XDP multi-buffer): loaded with
 * BPF_F_XDP_HAS_FRAGS, which drivers require before they take an MTU beyond one page. */
SEC("xdp.frags")
int llr_classify_mb(struct xdp_md *ctx)
{
	return classify(ctx);
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";
