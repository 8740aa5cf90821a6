//! The kernel's index of each RDMA device, from its RDMA netlink: the order the devices
//! registered, which nvidia-smi numbers NICs in (`view::nic_order`), in every build
//! (libibverbs gives the same index only with the `verbs` feature).
//!
//! One `RDMA_NLDEV_CMD_GET` dump, as rdma-core asks for it to list devices
//! (`rdmanl_get_devices`, util/rdma_nl.c: `RDMA_NL_GET_TYPE(RDMA_NL_NLDEV,
//! RDMA_NLDEV_CMD_GET)`, `NLM_F_DUMP`, no attributes). Each reply message holds one
//! device: `RDMA_NLDEV_ATTR_DEV_INDEX` (u32) and `RDMA_NLDEV_ATTR_DEV_NAME` (NUL-ended
//! string) among others (`fill_nldev_handle`, drivers/infiniband/core/nldev.c). The
//! constants are the kernel's ABI, include/uapi/rdma/rdma_netlink.h (torvalds/linux).

use super::facts::{FactSource, Facts, SourceError};
use crate::model::DeviceIndexSnapshot;
use crate::sysfs::Sysfs;
use netlink_packet_core::{
    NLM_F_DUMP, NLM_F_DUMP_INTR, NLM_F_REQUEST, NetlinkBuffer, NetlinkDeserializable,
    NetlinkHeader, NetlinkMessage, NetlinkPayload, NetlinkSerializable, NlasIterator, parse_string,
    parse_u32,
};
use std::time::{Duration, Instant};

/// `RDMA_NL_NLDEV`: the RDMA device interface client (enum after `RDMA_NL_IWCM = 2`,
/// `RDMA_NL_RSVD`, `RDMA_NL_LS`).
const RDMA_NL_NLDEV: u16 = 5;
/// `RDMA_NLDEV_CMD_GET` (`enum rdma_nldev_command`, after `RDMA_NLDEV_CMD_UNSPEC`).
const RDMA_NLDEV_CMD_GET: u16 = 1;
/// `RDMA_NL_GET_TYPE(client, op)`: `(client << 10) + op`.
pub const NLDEV_GET: u16 = (RDMA_NL_NLDEV << 10) + RDMA_NLDEV_CMD_GET;
/// `RDMA_NLDEV_ATTR_DEV_INDEX` (u32, `enum rdma_nldev_attr`).
pub const ATTR_DEV_INDEX: u16 = 1;
/// `RDMA_NLDEV_ATTR_DEV_NAME` (string).
pub const ATTR_DEV_NAME: u16 = 2;

/// How long the kernel may take to answer the whole dump. It answers at once where it
/// answers at all; a socket that never does must not hold the command.
pub const TIMEOUT: Duration = Duration::from_secs(2);

/// The payload of one nldev message: its attributes, undecoded.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
struct Nldev {
    message_type: u16,
    attributes: Vec<u8>,
}

impl NetlinkSerializable for Nldev {
    fn message_type(&self) -> u16 {
        self.message_type
    }

    fn buffer_len(&self) -> usize {
        self.attributes.len()
    }

    fn serialize(&self, buffer: &mut [u8]) {
        buffer[..self.attributes.len()].copy_from_slice(&self.attributes);
    }
}

impl NetlinkDeserializable for Nldev {
    type Error = std::convert::Infallible;

    fn deserialize(header: &NetlinkHeader, payload: &[u8]) -> Result<Self, Self::Error> {
        Ok(Self {
            message_type: header.message_type,
            attributes: payload.to_vec(),
        })
    }
}

/// The request: a dump of every device, sequence number `seq`.
pub fn request(seq: u32) -> Vec<u8> {
    let mut header = NetlinkHeader::default();
    header.flags = NLM_F_REQUEST | NLM_F_DUMP;
    header.sequence_number = seq;
    let mut message = NetlinkMessage::new(
        header,
        NetlinkPayload::InnerMessage(Nldev {
            message_type: NLDEV_GET,
            attributes: Vec::new(),
        }),
    );
    message.finalize();
    let mut buf = vec![0; message.buffer_len()];
    message.serialize(&mut buf);
    buf
}

/// What one datagram of the reply held.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Reply {
    /// (index, name) of each device, in the kernel's order.
    pub devices: Vec<(u32, String)>,
    /// Whether it ended the dump (`NLMSG_DONE`).
    pub done: bool,
}

/// Parses one datagram of the answer to the dump `seq` (messages of another sequence are
/// not ours and are skipped).
///
/// # Errors
/// [`SourceError::Unavailable`] where the kernel refused (`NLMSG_ERROR`) or the devices
/// changed during the dump (`NLM_F_DUMP_INTR`): no index, as without netlink.
/// [`SourceError::Failed`] where the bytes are no nldev answer (truncated, malformed).
pub fn parse_reply(bytes: &[u8], seq: u32) -> Result<Reply, SourceError> {
    let failed = |message: String| SourceError::Failed {
        source_name: "RDMA netlink",
        message,
    };
    let mut reply = Reply::default();
    let mut rest = bytes;
    while !rest.is_empty() {
        let len = NetlinkBuffer::new_checked(rest)
            .map_err(|e| failed(format!("reply: {e}")))?
            .length() as usize;
        let message = NetlinkMessage::<Nldev>::deserialize(&rest[..len])
            .map_err(|e| failed(format!("reply: {e}")))?;
        // Messages are padded to 4 bytes; the last may end the datagram unpadded.
        rest = rest.get(len.next_multiple_of(4)..).unwrap_or_default();
        if message.header.sequence_number != seq {
            continue;
        }
        if message.header.flags & NLM_F_DUMP_INTR != 0 {
            return Err(SourceError::Unavailable(
                "RDMA netlink: the devices changed during the dump".to_string(),
            ));
        }
        match message.payload {
            NetlinkPayload::Done(_) => {
                reply.done = true;
                break;
            }
            NetlinkPayload::Error(e) if e.code.is_some() => {
                return Err(SourceError::Unavailable(format!(
                    "RDMA netlink: the kernel answered {}",
                    e.to_io()
                )));
            }
            NetlinkPayload::InnerMessage(Nldev {
                message_type,
                attributes,
            }) => {
                if message_type != NLDEV_GET {
                    return Err(failed(format!(
                        "reply: message type {message_type:#x}, not {NLDEV_GET:#x}"
                    )));
                }
                reply.devices.push(device(&attributes).map_err(failed)?);
            }
            // An acknowledgement, a no-op.
            _ => {}
        }
    }
    Ok(reply)
}

/// The index and name of one device message.
fn device(attributes: &[u8]) -> Result<(u32, String), String> {
    let (mut index, mut name) = (None, None);
    for nla in NlasIterator::new(attributes) {
        let nla = nla.map_err(|e| format!("device attributes: {e}"))?;
        match nla.kind() {
            ATTR_DEV_INDEX => {
                index = Some(parse_u32(nla.value()).map_err(|e| format!("device index: {e}"))?);
            }
            ATTR_DEV_NAME => {
                name = Some(parse_string(nla.value()).map_err(|e| format!("device name: {e}"))?);
            }
            _ => {}
        }
    }
    match (index, name) {
        (Some(i), Some(n)) if !n.is_empty() => Ok((i, n)),
        _ => Err("a device without index or name".to_string()),
    }
}

/// Dumps the devices from the running kernel, waiting at most `timeout` in all.
///
/// # Errors
/// [`SourceError::Unavailable`] where there is no RDMA netlink to ask (no ib_core, a
/// sandbox that refuses the socket) or it did not answer in time; [`SourceError::Failed`]
/// where it answered with something else than a dump.
pub fn read_device_index(timeout: Duration) -> Result<Vec<(u32, String)>, SourceError> {
    use netlink_sys::protocols::NETLINK_RDMA;
    dump(NETLINK_RDMA, &netlink_sys::SocketAddr::new(0, 0), timeout)
}

/// Sends the dump request to `peer` (the kernel: port 0) over a netlink socket of
/// `protocol` and reads the answer until `NLMSG_DONE`, waiting at most `timeout` in all.
fn dump(
    protocol: isize,
    peer: &netlink_sys::SocketAddr,
    timeout: Duration,
) -> Result<Vec<(u32, String)>, SourceError> {
    use netlink_sys::Socket;
    use rustix::net::sockopt::{Timeout, set_socket_timeout};
    let unavailable = |what: &str, e: std::io::Error| {
        SourceError::Unavailable(format!("RDMA netlink: {what}: {e}"))
    };
    let deadline = Instant::now() + timeout;
    let mut socket = Socket::new(protocol).map_err(|e| unavailable("socket", e))?;
    socket.bind_auto().map_err(|e| unavailable("bind", e))?;
    // Only the peer's answers.
    socket
        .connect(peer)
        .map_err(|e| unavailable("connect", e))?;
    let seq = 1;
    socket
        .send(&request(seq), 0)
        .map_err(|e| unavailable("send", e))?;
    let mut devices = Vec::new();
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(SourceError::Unavailable(format!(
                "RDMA netlink: no answer in {timeout:?}"
            )));
        }
        set_socket_timeout(&socket, Timeout::Recv, Some(left))
            .map_err(|e| unavailable("timeout", e.into()))?;
        // The kernel fills a dump datagram up to 32 KiB (NLMSG_GOODSIZE and less).
        let mut buf = Vec::with_capacity(64 << 10);
        match socket.recv(&mut buf, 0) {
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(unavailable("receive", e)),
        }
        let reply = parse_reply(&buf, seq)?;
        devices.extend(reply.devices);
        if reply.done {
            return Ok(devices);
        }
    }
}

/// The live RDMA netlink, for a root that is the running system. Where there is none to
/// ask it gives no index, silently: the order then comes from libibverbs if built in,
/// else from the names (`view::nic_order` says so).
#[derive(Debug, Clone, Copy, Default)]
pub struct LiveRdmaNetlink;

impl FactSource for LiveRdmaNetlink {
    fn collect(&self, _fs: &Sysfs) -> Result<Facts, SourceError> {
        match read_device_index(TIMEOUT) {
            Ok(pairs) => Ok(Facts::DeviceIndex(DeviceIndexSnapshot::new(pairs))),
            Err(SourceError::Unavailable(_)) => {
                Ok(Facts::DeviceIndex(DeviceIndexSnapshot::new([])))
            }
            Err(e) => Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Messages laid out by hand as the kernel writes them (struct nlmsghdr, then
    // struct nlattr each padded to 4 bytes), not through the crate under test.
    const NLM_F_MULTI: u16 = 0x2;

    fn nlmsg(kind: u16, flags: u16, seq: u32, payload: &[u8]) -> Vec<u8> {
        let mut m = Vec::new();
        m.extend_from_slice(&(16 + payload.len() as u32).to_ne_bytes());
        m.extend_from_slice(&kind.to_ne_bytes());
        m.extend_from_slice(&flags.to_ne_bytes());
        m.extend_from_slice(&seq.to_ne_bytes());
        m.extend_from_slice(&4242u32.to_ne_bytes());
        m.extend_from_slice(payload);
        while m.len() % 4 != 0 {
            m.push(0);
        }
        m
    }

    fn nla(kind: u16, value: &[u8]) -> Vec<u8> {
        let mut a = Vec::new();
        a.extend_from_slice(&(4 + value.len() as u16).to_ne_bytes());
        a.extend_from_slice(&kind.to_ne_bytes());
        a.extend_from_slice(value);
        while a.len() % 4 != 0 {
            a.push(0);
        }
        a
    }

    /// One device of the dump: index, name, the port count, and a 64-bit attribute
    /// with its pad (`nla_put_u64_64bit`, `RDMA_NLDEV_ATTR_PAD` = 0), as nldev.c fills it.
    fn device_msg(seq: u32, index: u32, name: &str) -> Vec<u8> {
        let mut p = nla(ATTR_DEV_INDEX, &index.to_ne_bytes());
        let mut cname = name.as_bytes().to_vec();
        cname.push(0);
        p.extend(nla(ATTR_DEV_NAME, &cname));
        p.extend(nla(3, &1u32.to_ne_bytes())); // RDMA_NLDEV_ATTR_PORT_INDEX
        p.extend(nla(0, &[])); // RDMA_NLDEV_ATTR_PAD
        p.extend(nla(4, &0x1234_5678_9abc_def0u64.to_ne_bytes())); // CAP_FLAGS
        nlmsg(NLDEV_GET, NLM_F_MULTI, seq, &p)
    }

    fn done(seq: u32) -> Vec<u8> {
        nlmsg(3, NLM_F_MULTI, seq, &0i32.to_ne_bytes())
    }

    #[test]
    fn the_request_is_a_dump_of_nldev_get() {
        let r = request(7);
        // nlmsghdr alone: length 16, type (5 << 10) + 1, NLM_F_REQUEST | NLM_F_DUMP
        // (0x1 | 0x300), sequence 7, port 0.
        let mut want = Vec::new();
        want.extend_from_slice(&16u32.to_ne_bytes());
        want.extend_from_slice(&0x1401u16.to_ne_bytes());
        want.extend_from_slice(&0x0301u16.to_ne_bytes());
        want.extend_from_slice(&7u32.to_ne_bytes());
        want.extend_from_slice(&0u32.to_ne_bytes());
        assert_eq!(r, want);
    }

    #[test]
    fn a_dump_in_two_datagrams_ends_with_done() {
        // pub-h200-bond-blog's story: mlx5_1 and mlx5_2 left when the bond formed.
        let mut first = device_msg(1, 0, "mlx5_0");
        first.extend(device_msg(1, 3, "mlx5_3"));
        let mut second = device_msg(1, 10, "mlx5_bond_0");
        second.extend(done(1));
        let a = parse_reply(&first, 1).unwrap();
        assert_eq!(a.devices, [(0, "mlx5_0".into()), (3, "mlx5_3".into())]);
        assert!(!a.done);
        let b = parse_reply(&second, 1).unwrap();
        assert_eq!(b.devices, [(10, "mlx5_bond_0".to_string())]);
        assert!(b.done);
    }

    #[test]
    fn an_empty_dump_is_done_with_no_device() {
        // A network namespace in exclusive mode that holds no device.
        let r = parse_reply(&done(1), 1).unwrap();
        assert_eq!(
            r,
            Reply {
                devices: vec![],
                done: true
            }
        );
    }

    #[test]
    fn messages_of_another_request_are_skipped() {
        let mut bytes = device_msg(9, 5, "stale0");
        bytes.extend(device_msg(1, 0, "mlx5_ib0"));
        let r = parse_reply(&bytes, 1).unwrap();
        assert_eq!(r.devices, [(0, "mlx5_ib0".to_string())]);
    }

    #[test]
    fn an_error_answer_is_no_index() {
        // NLMSG_ERROR: -EOPNOTSUPP and the request's header back.
        let mut payload = (-95i32).to_ne_bytes().to_vec();
        payload.extend_from_slice(&request(1));
        let err = parse_reply(&nlmsg(2, 0, 1, &payload), 1).unwrap_err();
        assert!(matches!(err, SourceError::Unavailable(ref m) if m.contains("RDMA netlink")));
    }

    #[test]
    fn an_acknowledgement_is_no_error() {
        let mut payload = 0i32.to_ne_bytes().to_vec();
        payload.extend_from_slice(&request(1));
        let r = parse_reply(&nlmsg(2, 0, 1, &payload), 1).unwrap();
        assert_eq!(r, Reply::default());
    }

    #[test]
    fn an_interrupted_dump_is_no_index() {
        let bytes = nlmsg(NLDEV_GET, NLM_F_MULTI | NLM_F_DUMP_INTR, 1, &[]);
        assert!(matches!(
            parse_reply(&bytes, 1),
            Err(SourceError::Unavailable(_))
        ));
    }

    #[test]
    fn truncated_or_garbage_bytes_fail_without_panic() {
        let whole = device_msg(1, 0, "mlx5_0");
        for cut in 1..whole.len() {
            let r = parse_reply(&whole[..cut], 1);
            assert!(
                matches!(r, Err(SourceError::Failed { .. })),
                "cut at {cut}: {r:?}"
            );
        }
        // A header claiming more than it holds; and noise.
        let mut long = whole.clone();
        long[0] = 0xff;
        assert!(parse_reply(&long, 1).is_err());
        assert!(parse_reply(&[0xde, 0xad, 0xbe, 0xef, 1, 2, 3], 1).is_err());
        // A length of 0 must not loop.
        assert!(parse_reply(&[0; 16], 1).is_err());
    }

    #[test]
    fn a_device_message_without_a_name_fails() {
        let p = nla(ATTR_DEV_INDEX, &4u32.to_ne_bytes());
        let r = parse_reply(&nlmsg(NLDEV_GET, NLM_F_MULTI, 1, &p), 1);
        assert!(matches!(r, Err(SourceError::Failed { .. })), "{r:?}");
        // An index of the wrong width.
        let mut p = nla(ATTR_DEV_INDEX, &[1, 2]);
        p.extend(nla(ATTR_DEV_NAME, b"mlx5_0\0"));
        let r = parse_reply(&nlmsg(NLDEV_GET, NLM_F_MULTI, 1, &p), 1);
        assert!(matches!(r, Err(SourceError::Failed { .. })), "{r:?}");
    }

    #[test]
    fn another_message_type_fails() {
        // RDMA_NLDEV_CMD_PORT_GET's answer is not a device list.
        let bytes = nlmsg((5 << 10) + 5, NLM_F_MULTI, 1, &[]);
        assert!(matches!(
            parse_reply(&bytes, 1),
            Err(SourceError::Failed { .. })
        ));
    }

    #[test]
    fn this_machine_answers_in_time_or_says_unavailable() {
        // The build machines hold no RDMA device (and mostly no ib_core): whatever the
        // kernel does, the read ends within its timeout and is no failure.
        let start = Instant::now();
        let r = read_device_index(TIMEOUT);
        assert!(start.elapsed() < TIMEOUT + Duration::from_secs(1));
        match r {
            Ok(_) | Err(SourceError::Unavailable(_)) => {}
            Err(e) => panic!("{e}"),
        }
        let facts = LiveRdmaNetlink.collect(&Sysfs::live()).unwrap();
        assert!(matches!(facts, Facts::DeviceIndex(_)));
    }

    #[test]
    fn a_peer_that_never_answers_times_out() {
        // A user-space netlink socket that reads nothing stands in for a kernel that
        // does not answer.
        use netlink_sys::{Socket, SocketAddr, protocols::NETLINK_USERSOCK};
        let mut silent = Socket::new(NETLINK_USERSOCK).unwrap();
        let addr = silent.bind_auto().unwrap();
        let peer = SocketAddr::new(addr.port_number(), 0);
        let start = Instant::now();
        let r = dump(NETLINK_USERSOCK, &peer, Duration::from_millis(300));
        let took = start.elapsed();
        assert!(matches!(r, Err(SourceError::Unavailable(_))), "{r:?}");
        assert!(took >= Duration::from_millis(300), "{took:?}");
        assert!(took < Duration::from_millis(1300), "{took:?}");
    }
}
