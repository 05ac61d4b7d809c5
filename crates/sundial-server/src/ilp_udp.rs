//! ILP over UDP: one receiving thread that only empties the socket, one ingesting thread that
//! parses and commits, and a fixed pool of buffers between them.
//!
//! ```text
//!  kernel socket buffer (SO_RCVBUF) ─recvmmsg─▶ receiver thread ─full chunk─▶ ingester thread
//!        ▲ unicast or multicast group             ▲                              │ Ingestor
//!        │                                        └──────── empty chunk ◀────────┘ commit
//! ```
//!
//! The receiver never waits for a commit: while the ingester commits, datagrams go into free
//! chunks. Only when every chunk is full does the receiver wait, and the kernel's buffer takes
//! over; past that the kernel drops datagrams, as UDP does. Memory is bounded by
//! `chunks x datagrams_per_chunk x DATAGRAM_BYTES_MAX`.

use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use socket2::{Domain, Protocol, Socket, Type};
use sundial_ilp::LineSplitter;
use sundial_ingest::Ingestor;

use crate::ilp::{Shared, Transport, feed_lines};

/// Largest UDP payload over IPv4.
pub const DATAGRAM_BYTES_MAX: usize = 65_507;

/// How often the threads look at the stop flag and at due commits.
const TICK_MS: u64 = 50;

/// Settings of the UDP receiver.
#[derive(Debug, Clone)]
pub struct UdpOptions {
    pub addr: SocketAddr,
    /// Join this multicast group (IPv4) on `multicast_interface`; `addr` then gives the port.
    pub multicast_group: Option<Ipv4Addr>,
    pub multicast_interface: Ipv4Addr,
    /// Requested kernel receive buffer (SO_RCVBUF), in bytes.
    pub recv_buffer_bytes: usize,
    /// Datagrams taken per receive call, and per chunk.
    pub datagrams_per_chunk: usize,
    /// Chunks in the pool between the threads.
    pub chunks: usize,
}

/// Datagrams received in one batch, back to back.
struct Chunk {
    data: Vec<u8>,
    /// Length and sender of each datagram, in order; datagram `i` starts at
    /// `i * DATAGRAM_BYTES_MAX`.
    received: Vec<(usize, Option<SocketAddr>)>,
}

impl Chunk {
    fn new(datagrams: usize) -> Chunk {
        Chunk {
            data: vec![0; datagrams * DATAGRAM_BYTES_MAX],
            received: Vec::with_capacity(datagrams),
        }
    }

    fn datagrams(&self) -> impl Iterator<Item = (&[u8], Option<SocketAddr>)> {
        self.received.iter().enumerate().map(|(i, (len, peer))| {
            let start = i * DATAGRAM_BYTES_MAX;
            (&self.data[start..start + len], *peer)
        })
    }
}

/// The running receiver; [`UdpReceiver::stop`] drains and commits.
pub struct UdpReceiver {
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
}

impl UdpReceiver {
    pub fn start(options: UdpOptions, shared: Arc<Shared>) -> Result<UdpReceiver, String> {
        let socket = open_socket(&options)?;
        let stop = Arc::new(AtomicBool::new(false));
        let chunks = options.chunks.max(1);
        let (full_tx, full_rx) = sync_channel::<Chunk>(chunks);
        let (empty_tx, empty_rx) = sync_channel::<Chunk>(chunks);
        for _ in 0..chunks {
            let _ = empty_tx.send(Chunk::new(options.datagrams_per_chunk.max(1)));
        }
        let receiver = {
            let stop = stop.clone();
            std::thread::Builder::new()
                .name("ilp-udp-recv".into())
                .spawn(move || receive(socket, empty_rx, full_tx, stop))
                .map_err(|e| format!("cannot start the UDP receiver: {e}"))?
        };
        let ingester = std::thread::Builder::new()
            .name("ilp-udp-ingest".into())
            .spawn(move || ingest(shared, full_rx, empty_tx))
            .map_err(|e| format!("cannot start the UDP ingester: {e}"))?;
        Ok(UdpReceiver {
            stop,
            threads: vec![receiver, ingester],
        })
    }

    /// Takes what the kernel already holds, commits everything, and waits for both threads.
    pub fn stop(self) {
        self.stop.store(true, Ordering::Release);
        for thread in self.threads {
            let _ = thread.join();
        }
    }
}

fn open_socket(options: &UdpOptions) -> Result<Socket, String> {
    let addr = options.addr;
    let fail = |what: &str, e: std::io::Error| {
        let hint = match e.kind() {
            std::io::ErrorKind::AddrInUse => {
                "; another process uses this port: choose another with --ilp-udp-addr \
                 (or SUNDIAL_ILP_UDP_ADDR)"
            }
            _ => "",
        };
        format!("ILP/UDP on {addr}: cannot {what}: {e}{hint}")
    };
    let socket = Socket::new(Domain::for_address(addr), Type::DGRAM, Some(Protocol::UDP))
        .map_err(|e| fail("create the socket", e))?;
    set_recv_buffer(&socket, options.recv_buffer_bytes);
    let bind_addr = match options.multicast_group {
        Some(_) => {
            socket
                .set_reuse_address(true)
                .map_err(|e| fail("set SO_REUSEADDR", e))?;
            SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, addr.port()))
        }
        None => addr,
    };
    socket
        .bind(&bind_addr.into())
        .map_err(|e| fail("bind", e))?;
    if let Some(group) = options.multicast_group {
        socket
            .join_multicast_v4(&group, &options.multicast_interface)
            .map_err(|e| fail(&format!("join multicast group {group}"), e))?;
    }
    socket
        .set_read_timeout(Some(Duration::from_millis(TICK_MS)))
        .map_err(|e| fail("set a receive timeout", e))?;
    Ok(socket)
}

/// Asks for `bytes` of kernel buffer. The kernel caps SO_RCVBUF at `net.core.rmem_max`; a
/// privileged process may go past that with SO_RCVBUFFORCE.
fn set_recv_buffer(socket: &Socket, bytes: usize) {
    let _ = socket.set_recv_buffer_size(bytes);
    let granted = socket.recv_buffer_size().unwrap_or(0);
    // Linux reports twice the requested size (the other half is bookkeeping).
    #[cfg(target_os = "linux")]
    if granted < bytes {
        use std::os::fd::AsRawFd;
        let value = libc::c_int::try_from(bytes).unwrap_or(libc::c_int::MAX);
        // SAFETY: a valid socket descriptor and a pointer to a c_int of the given size.
        unsafe {
            libc::setsockopt(
                socket.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_RCVBUFFORCE,
                (&value as *const libc::c_int).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            );
        }
    }
    let granted = socket.recv_buffer_size().unwrap_or(granted);
    if granted < bytes {
        tracing::warn!(
            "ILP/UDP: asked for a {bytes}-byte receive buffer, the kernel granted {granted} \
             (raise net.core.rmem_max)"
        );
    } else {
        tracing::info!("ILP/UDP: receive buffer {granted} bytes");
    }
}

/// The receiving thread: fills chunks, hands them over; at stop, takes what the kernel holds.
fn receive(socket: Socket, empty: Receiver<Chunk>, full: SyncSender<Chunk>, stop: Arc<AtomicBool>) {
    let mut batch = RecvBatch::new();
    let mut draining = false;
    let mut spare: Option<Chunk> = None;
    loop {
        // The ingester hands every chunk back, so this waits only while all are full; it fails
        // only if the ingester is gone.
        let mut chunk = match spare.take() {
            Some(chunk) => chunk,
            None => match empty.recv() {
                Ok(chunk) => chunk,
                Err(_) => return,
            },
        };
        if !draining && stop.load(Ordering::Acquire) {
            // From now on, take only what the kernel already holds, without waiting.
            draining = true;
            let _ = socket.set_nonblocking(true);
        }
        match batch.receive(&socket, &mut chunk) {
            Ok(n) if n > 0 => {
                if full.send(chunk).is_err() {
                    return;
                }
            }
            Ok(_) => spare = Some(chunk),
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock
                        | std::io::ErrorKind::TimedOut
                        | std::io::ErrorKind::Interrupted
                ) =>
            {
                if draining {
                    return;
                }
                spare = Some(chunk);
            }
            Err(e) => {
                tracing::warn!("ILP/UDP receive failed: {e}");
                spare = Some(chunk);
                std::thread::sleep(Duration::from_millis(TICK_MS));
            }
        }
    }
}

/// The ingesting thread: parses every datagram of every chunk, commits by rows and time.
fn ingest(shared: Arc<Shared>, full: Receiver<Chunk>, empty: SyncSender<Chunk>) {
    let mut ingestor = Ingestor::with_sinks(shared.sinks.clone(), shared.ingest.clone());
    let mut splitter = LineSplitter::new(shared.ingest.line_bytes_max);
    let unknown = SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 0));
    let pause = Duration::from_millis(shared.ingest.pause_commit_ms);
    let mut last_received = Instant::now();
    // Rows were ingested since the last commit of everything.
    let mut uncommitted = false;
    loop {
        match full.recv_timeout(Duration::from_millis(TICK_MS)) {
            Ok(mut chunk) => {
                last_received = Instant::now();
                uncommitted = true;
                let before = ingestor.stats();
                for (datagram, peer) in chunk.datagrams() {
                    feed_lines(
                        &mut ingestor,
                        &mut splitter,
                        datagram,
                        true,
                        peer.unwrap_or(unknown),
                    );
                }
                shared.count(Transport::Udp, &ingestor, before);
                chunk.received.clear();
                let _ = empty.send(chunk);
            }
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => break,
        }
        // Every sender paused: commit everything; else what has waited long enough.
        let committed = if uncommitted && last_received.elapsed() >= pause {
            uncommitted = false;
            ingestor.flush()
        } else {
            ingestor.flush_due(Instant::now())
        };
        if let Err(e) = committed {
            tracing::error!("ILP/UDP commit failed: {e}");
        }
        shared.count_tables(Transport::Udp, &mut ingestor);
    }
    if let Err(e) = ingestor.flush() {
        tracing::error!("ILP/UDP commit failed: {e}");
    }
    shared.count_tables(Transport::Udp, &mut ingestor);
}

/// Receives up to a chunk's worth of datagrams in one system call (recvmmsg on Linux).
#[cfg(target_os = "linux")]
struct RecvBatch {
    headers: Vec<libc::mmsghdr>,
    iovecs: Vec<libc::iovec>,
    addrs: Vec<libc::sockaddr_storage>,
}

#[cfg(target_os = "linux")]
impl RecvBatch {
    fn new() -> RecvBatch {
        RecvBatch {
            headers: Vec::new(),
            iovecs: Vec::new(),
            addrs: Vec::new(),
        }
    }

    /// Fills `chunk` with the datagrams available now (waiting for the first one at most the
    /// socket's read timeout); returns how many.
    fn receive(&mut self, socket: &Socket, chunk: &mut Chunk) -> std::io::Result<usize> {
        use std::os::fd::AsRawFd;
        chunk.received.clear();
        let capacity = chunk.data.len() / DATAGRAM_BYTES_MAX;
        // SAFETY: all-zero bytes are a valid value of these C structs.
        let zeroed_addr: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
        self.addrs.resize(capacity, zeroed_addr);
        self.iovecs.clear();
        for i in 0..capacity {
            let base = chunk.data[i * DATAGRAM_BYTES_MAX..].as_mut_ptr();
            self.iovecs.push(libc::iovec {
                iov_base: base.cast(),
                iov_len: DATAGRAM_BYTES_MAX,
            });
        }
        self.headers.clear();
        for i in 0..capacity {
            // SAFETY: as above.
            let mut header: libc::mmsghdr = unsafe { std::mem::zeroed() };
            header.msg_hdr.msg_name = (&mut self.addrs[i] as *mut libc::sockaddr_storage).cast();
            header.msg_hdr.msg_namelen =
                std::mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;
            header.msg_hdr.msg_iov = &mut self.iovecs[i];
            header.msg_hdr.msg_iovlen = 1;
            self.headers.push(header);
        }
        // SAFETY: every header points at a live iovec over `chunk.data` and a live address
        // slot; the kernel writes at most `iov_len` bytes and `msg_namelen` address bytes.
        let n = unsafe {
            libc::recvmmsg(
                socket.as_raw_fd(),
                self.headers.as_mut_ptr(),
                capacity as libc::c_uint,
                libc::MSG_WAITFORONE,
                std::ptr::null_mut(),
            )
        };
        if n < 0 {
            return Err(std::io::Error::last_os_error());
        }
        let n = n as usize;
        for i in 0..n {
            let len = (self.headers[i].msg_len as usize).min(DATAGRAM_BYTES_MAX);
            let peer = sockaddr_to_std(&self.addrs[i], self.headers[i].msg_hdr.msg_namelen);
            chunk.received.push((len, peer));
        }
        Ok(n)
    }
}

#[cfg(target_os = "linux")]
fn sockaddr_to_std(storage: &libc::sockaddr_storage, len: libc::socklen_t) -> Option<SocketAddr> {
    let len = len as usize;
    match libc::c_int::from(storage.ss_family) {
        libc::AF_INET if len >= std::mem::size_of::<libc::sockaddr_in>() => {
            // SAFETY: the kernel wrote a sockaddr_in, which fits in sockaddr_storage.
            let addr: &libc::sockaddr_in =
                unsafe { &*(storage as *const libc::sockaddr_storage).cast() };
            let ip = Ipv4Addr::from(u32::from_be(addr.sin_addr.s_addr));
            Some(SocketAddr::V4(SocketAddrV4::new(
                ip,
                u16::from_be(addr.sin_port),
            )))
        }
        libc::AF_INET6 if len >= std::mem::size_of::<libc::sockaddr_in6>() => {
            // SAFETY: the kernel wrote a sockaddr_in6, which fits in sockaddr_storage.
            let addr: &libc::sockaddr_in6 =
                unsafe { &*(storage as *const libc::sockaddr_storage).cast() };
            let ip = std::net::Ipv6Addr::from(addr.sin6_addr.s6_addr);
            Some(SocketAddr::V6(std::net::SocketAddrV6::new(
                ip,
                u16::from_be(addr.sin6_port),
                addr.sin6_flowinfo,
                addr.sin6_scope_id,
            )))
        }
        _ => None,
    }
}

/// Elsewhere: one datagram per call.
#[cfg(not(target_os = "linux"))]
struct RecvBatch;

#[cfg(not(target_os = "linux"))]
impl RecvBatch {
    fn new() -> RecvBatch {
        RecvBatch
    }

    fn receive(&mut self, socket: &Socket, chunk: &mut Chunk) -> std::io::Result<usize> {
        chunk.received.clear();
        let buf = &mut chunk.data[..DATAGRAM_BYTES_MAX];
        // SAFETY: u8 and MaybeUninit<u8> have the same layout; the buffer is initialised.
        let uninit = unsafe { &mut *(buf as *mut [u8] as *mut [std::mem::MaybeUninit<u8>]) };
        let (len, addr) = socket.recv_from(uninit)?;
        chunk.received.push((len, addr.as_socket()));
        Ok(1)
    }
}
