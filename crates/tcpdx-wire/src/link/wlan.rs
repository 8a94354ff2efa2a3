//! IEEE 802.11 MAC header of data frames (what carries IP over Wi-Fi), followed by LLC.
//!
//! Only unprotected, unfragmented data frames with a body are followed: the header is 24
//! bytes, +6 for a fourth address (To DS and From DS), +2 for QoS control, +4 for HT
//! control (Order flag on a QoS frame).

use crate::bytes::{arr, byte, need, tail};
use crate::error::StopKind;

mod field {
    use crate::bytes::Field;
    pub const FRAME_CONTROL: Field = 0..2;
    pub const SEQ_CTRL: Field = 22..24;
}

/// Length of a data frame header with three addresses.
pub const BASE_HEADER_LEN: usize = 24;
/// Frame type "data".
pub const TYPE_DATA: u8 = 2;
const FLAG_TO_DS: u8 = 0x01;
const FLAG_FROM_DS: u8 = 0x02;
const FLAG_MORE_FRAGMENTS: u8 = 0x04;
const FLAG_PROTECTED: u8 = 0x40;
const FLAG_ORDER: u8 = 0x80;
/// Subtype bit: QoS data.
const SUBTYPE_QOS: u8 = 0x08;
/// Subtype bit: no frame body (null function, CF-ack/poll only).
const SUBTYPE_NO_BODY: u8 = 0x04;
/// QoS control bit announcing an aggregate MSDU.
const QOS_AMSDU: u8 = 0x80;

/// A checked view of an 802.11 data frame header.
#[derive(Clone, Copy, Debug)]
pub struct WlanSlice<'a> {
    buf: &'a [u8],
    fc: [u8; 2],
    header_len: usize,
}

impl<'a> WlanSlice<'a> {
    /// Checks a data frame header. `swapped_fc` is for CAPWAP from Cisco access points,
    /// which send the two frame-control bytes swapped (Wireshark's default there).
    /// Non-data, body-less, protected, fragmented and A-MSDU frames give `NotIp`.
    pub fn from_slice(buf: &'a [u8], swapped_fc: bool) -> Result<Self, StopKind> {
        need(buf, 2)?;
        let [a, b] = arr(buf, field::FRAME_CONTROL.start);
        let fc = if swapped_fc { [b, a] } else { [a, b] };
        let (kind, subtype, flags) = ((fc[0] >> 2) & 0x03, fc[0] >> 4, fc[1]);
        if kind != TYPE_DATA || subtype & SUBTYPE_NO_BODY != 0 {
            return Err(StopKind::NotIp);
        }
        let mut header_len = BASE_HEADER_LEN;
        if flags & (FLAG_TO_DS | FLAG_FROM_DS) == FLAG_TO_DS | FLAG_FROM_DS {
            header_len += 6;
        }
        let qos_at = header_len;
        if subtype & SUBTYPE_QOS != 0 {
            header_len += 2;
            if flags & FLAG_ORDER != 0 {
                header_len += 4;
            }
        }
        need(buf, header_len)?;
        let s = Self {
            buf,
            fc,
            header_len,
        };
        let amsdu = subtype & SUBTYPE_QOS != 0 && byte(buf, qos_at) & QOS_AMSDU != 0;
        if flags & FLAG_PROTECTED != 0 || s.is_fragment() || amsdu {
            return Err(StopKind::NotIp);
        }
        Ok(s)
    }
    /// Frame control, in wire order after any swap.
    pub fn frame_control(&self) -> [u8; 2] {
        self.fc
    }
    /// True if more fragments of this MSDU follow. Like Wireshark, a frame with a non-zero
    /// fragment number but no more-fragments flag is taken as already reassembled (some
    /// interfaces capture it that way), so it is not a fragment.
    pub fn is_fragment(&self) -> bool {
        self.fc[1] & FLAG_MORE_FRAGMENTS != 0
    }
    /// Fragment number (low 4 bits of the sequence control field).
    pub fn fragment_number(&self) -> u8 {
        // 802.11 fields are little-endian: the fragment number is the low nibble of the
        // first sequence-control byte.
        byte(self.buf, field::SEQ_CTRL.start) & 0x0f
    }
    /// Header length.
    pub fn header_len(&self) -> usize {
        self.header_len
    }
    /// The frame body (LLC header first).
    pub fn payload(&self) -> &'a [u8] {
        tail(self.buf, self.header_len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// QoS data, To DS, then LLC/SNAP IPv4.
    static QOS_DATA: [u8; 27] = [
        0x88, 0x01, 0x00, 0x00, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 0x10, 0x00,
        0x00, 0x00, 0xaa,
    ];

    #[test]
    fn qos_data_frame() {
        let w = WlanSlice::from_slice(&QOS_DATA, false).unwrap();
        assert_eq!(w.header_len(), 26);
        assert_eq!(w.payload(), &[0xaa]);
        for len in 0..26 {
            assert!(matches!(
                WlanSlice::from_slice(&QOS_DATA[..len], false),
                Err(StopKind::Truncated { .. })
            ));
        }
    }

    #[test]
    fn swapped_frame_control() {
        let mut f = QOS_DATA;
        f.swap(0, 1);
        assert_eq!(WlanSlice::from_slice(&f, true).unwrap().header_len(), 26);
    }

    #[test]
    fn not_followed() {
        let mut f = QOS_DATA;
        f[1] |= FLAG_PROTECTED;
        assert_eq!(
            WlanSlice::from_slice(&f, false).unwrap_err(),
            StopKind::NotIp
        );
        let mut f = QOS_DATA;
        f[0] = 0x80; // beacon
        assert_eq!(
            WlanSlice::from_slice(&f, false).unwrap_err(),
            StopKind::NotIp
        );
        let mut f = QOS_DATA;
        f[1] |= FLAG_MORE_FRAGMENTS;
        assert_eq!(
            WlanSlice::from_slice(&f, false).unwrap_err(),
            StopKind::NotIp
        );
        // A fragment number alone is a frame the interface already reassembled.
        let mut f = QOS_DATA;
        f[22] = 0x06;
        assert_eq!(
            WlanSlice::from_slice(&f, false).unwrap().fragment_number(),
            6
        );
        let mut f = QOS_DATA;
        f[24] = QOS_AMSDU;
        assert_eq!(
            WlanSlice::from_slice(&f, false).unwrap_err(),
            StopKind::NotIp
        );
    }
}
