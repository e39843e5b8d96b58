//! The 64-byte `struct llr_rule` image the eBPF classifier (`bpf/classifier.c`) reads from its
//! array map.
//!
//! Layout, little-endian (host order) unless noted:
//!
//! | offset | type      | field                                                              |
//! |--------|-----------|--------------------------------------------------------------------|
//! | 0      | u32       | `fields`: bitmask of the fields the rule names ([`bpf_field`])      |
//! | 4      | u32       | `ifindex`                                                          |
//! | 8      | u16       | `vlan_id`                                                          |
//! | 10     | u8        | `vlan_pcp`                                                         |
//! | 11     | u8        | `proto`                                                            |
//! | 12     | u8        | `dscp`                                                             |
//! | 13     | u8        | `ip_version`: 4 or 6 (0 = a rule that can never match)              |
//! | 14     | u8        | `class`                                                            |
//! | 15     | u8        | `flex_off` (≤ 62)                                                  |
//! | 16     | u16       | `flex_value` (pre-masked)                                          |
//! | 18     | u16       | `flex_mask`; compare `((f[off] << 8) | f[off+1]) & mask == value`  |
//! | 20     | u16 × 4   | `sport_lo`, `sport_hi`, `dport_lo`, `dport_hi` (inclusive)          |
//! | 28     | u8[16]    | `src`, network byte order; IPv4 in the first 4 bytes, rest zero     |
//! | 44     | u8[16]    | `dst`, same layout                                                 |
//! | 60     | u8, u8    | `src_plen`, `dst_plen`                                             |
//! | 62     | u8[2]     | padding, zero                                                      |
//!
//! A SRC or DST prefix sets `IPVER` too, with the prefix's version, so the C side needs only one
//! version check. Fields not named by the rule are zero.

use core::net::IpAddr;

use super::Rule;

/// Size of one `struct llr_rule`.
pub const BPF_RULE_SIZE: usize = 64;
/// Capacity of the eBPF rule array map.
pub const BPF_MAX_RULES: usize = 64;

/// Bits of `llr_rule.fields`.
pub mod bpf_field {
    /// `ifindex` is checked.
    pub const IFINDEX: u32 = 1 << 0;
    /// `vlan_id` is checked.
    pub const VLAN_ID: u32 = 1 << 1;
    /// `vlan_pcp` is checked.
    pub const VLAN_PCP: u32 = 1 << 2;
    /// `proto` is checked.
    pub const PROTO: u32 = 1 << 3;
    /// `dscp` is checked.
    pub const DSCP: u32 = 1 << 4;
    /// `src`/`src_plen` is checked.
    pub const SRC: u32 = 1 << 5;
    /// `dst`/`dst_plen` is checked.
    pub const DST: u32 = 1 << 6;
    /// `sport_lo..=sport_hi` is checked.
    pub const SPORT: u32 = 1 << 7;
    /// `dport_lo..=dport_hi` is checked.
    pub const DPORT: u32 = 1 << 8;
    /// The flex word is checked.
    pub const FLEX: u32 = 1 << 9;
    /// `ip_version` is checked.
    pub const IPVER: u32 = 1 << 10;
}

fn put_addr(out: &mut [u8], a: IpAddr) {
    match a {
        IpAddr::V4(a) => out[..4].copy_from_slice(&a.octets()),
        IpAddr::V6(a) => out[..16].copy_from_slice(&a.octets()),
    }
}

impl Rule {
    /// The rule as a `struct llr_rule` (see the module table); the class is truncated to a byte
    /// (use [`RuleSet::to_bpf_map`](super::RuleSet::to_bpf_map) to have that checked).
    pub fn to_bpf_bytes(&self) -> [u8; BPF_RULE_SIZE] {
        use bpf_field as F;
        let mut b = [0u8; BPF_RULE_SIZE];
        let mut fields = 0u32;
        if let Some(i) = self.ifindex {
            fields |= F::IFINDEX;
            b[4..8].copy_from_slice(&i.to_le_bytes());
        }
        if let Some(v) = self.vlan_id {
            fields |= F::VLAN_ID;
            b[8..10].copy_from_slice(&v.to_le_bytes());
        }
        if let Some(p) = self.vlan_pcp {
            fields |= F::VLAN_PCP;
            b[10] = p;
        }
        if let Some(p) = self.proto {
            fields |= F::PROTO;
            b[11] = p;
        }
        if let Some(d) = self.dscp {
            fields |= F::DSCP;
            b[12] = d;
        }
        match self.required_version() {
            Ok(Some(v)) => {
                fields |= F::IPVER;
                b[13] = v.number();
            }
            Ok(None) => {}
            // Conflicting versions: version 0 matches no packet, as in the Rust matcher.
            Err(_) => fields |= F::IPVER,
        }
        b[14] = self.class as u8;
        if let Some(f) = self.flex {
            fields |= F::FLEX;
            b[15] = f.offset();
            b[16..18].copy_from_slice(&f.value().to_le_bytes());
            b[18..20].copy_from_slice(&f.mask().to_le_bytes());
        }
        if let Some(r) = self.sport {
            fields |= F::SPORT;
            b[20..22].copy_from_slice(&r.lo().to_le_bytes());
            b[22..24].copy_from_slice(&r.hi().to_le_bytes());
        }
        if let Some(r) = self.dport {
            fields |= F::DPORT;
            b[24..26].copy_from_slice(&r.lo().to_le_bytes());
            b[26..28].copy_from_slice(&r.hi().to_le_bytes());
        }
        if let Some(p) = self.src {
            fields |= F::SRC;
            put_addr(&mut b[28..44], p.addr());
            b[60] = p.len();
        }
        if let Some(p) = self.dst {
            fields |= F::DST;
            put_addr(&mut b[44..60], p.addr());
            b[61] = p.len();
        }
        b[0..4].copy_from_slice(&fields.to_le_bytes());
        b
    }
}
