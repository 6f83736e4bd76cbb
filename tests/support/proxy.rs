//! A loopback TCP proxy whose links a test can stall (a network partition:
//! nothing passes, nothing closes) or cut in the middle of a message.

#![allow(dead_code)]

use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

const PASS: u8 = 0;
const STALL: u8 = 1;
const CUT: u8 = 2;

pub struct Proxy {
    /// Where to connect instead of the upstream: `tcp://127.0.0.1:PORT`.
    pub address: String,
    mode: Arc<AtomicU8>,
    stop: Arc<AtomicBool>,
    threads: Arc<Mutex<Vec<JoinHandle<()>>>>,
    accept: Option<JoinHandle<()>>,
}

impl Proxy {
    /// A proxy to `upstream` (`tcp://HOST:PORT`), passing everything.
    pub fn start(upstream: &str) -> Proxy {
        let upstream = upstream.trim_start_matches("tcp://").to_string();
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the proxy");
        listener.set_nonblocking(true).expect("non-blocking");
        let address = format!("tcp://{}", listener.local_addr().expect("address"));
        let mode = Arc::new(AtomicU8::new(PASS));
        let stop = Arc::new(AtomicBool::new(false));
        let threads: Arc<Mutex<Vec<JoinHandle<()>>>> = Arc::default();
        let accept = {
            let (mode, stop, threads) = (mode.clone(), stop.clone(), threads.clone());
            std::thread::spawn(move || {
                while !stop.load(Ordering::SeqCst) {
                    let down = match listener.accept() {
                        Ok((s, _)) => s,
                        Err(e) if e.kind() == ErrorKind::WouldBlock => {
                            std::thread::sleep(Duration::from_millis(10));
                            continue;
                        }
                        Err(_) => continue,
                    };
                    let Ok(up) = TcpStream::connect(&upstream) else { continue };
                    let _ = down.set_nonblocking(false);
                    let mut links = threads.lock().unwrap_or_else(|e| e.into_inner());
                    for (from, to) in [(&down, &up), (&up, &down)] {
                        let (Ok(from), Ok(to)) = (from.try_clone(), to.try_clone()) else { continue };
                        let (mode, stop) = (mode.clone(), stop.clone());
                        links.push(std::thread::spawn(move || pump(from, to, &mode, &stop)));
                    }
                }
            })
        };
        Proxy { address, mode, stop, threads, accept: Some(accept) }
    }

    /// Nothing passes either way from now on; connections stay open.
    pub fn stall(&self) {
        self.mode.store(STALL, Ordering::SeqCst);
    }

    /// Everything passes again.
    pub fn heal(&self) {
        self.mode.store(PASS, Ordering::SeqCst);
    }

    /// The next chunk any link carries is cut in half and that connection
    /// closed both ways; then everything passes again.
    pub fn cut_next(&self) {
        self.mode.store(CUT, Ordering::SeqCst);
    }
}

fn pump(mut from: TcpStream, mut to: TcpStream, mode: &AtomicU8, stop: &AtomicBool) {
    let _ = from.set_read_timeout(Some(Duration::from_millis(20)));
    let mut buf = vec![0u8; 64 << 10];
    while !stop.load(Ordering::SeqCst) {
        if mode.load(Ordering::SeqCst) == STALL {
            std::thread::sleep(Duration::from_millis(10));
            continue;
        }
        let n = match from.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => continue,
            Err(_) => break,
        };
        // A stall that began while this read waited holds what it got.
        while mode.load(Ordering::SeqCst) == STALL && !stop.load(Ordering::SeqCst) {
            std::thread::sleep(Duration::from_millis(10));
        }
        if mode.compare_exchange(CUT, PASS, Ordering::SeqCst, Ordering::SeqCst).is_ok() {
            let _ = to.write_all(&buf[..n / 2]);
            break;
        }
        if to.write_all(&buf[..n]).is_err() {
            break;
        }
    }
    let _ = from.shutdown(Shutdown::Both);
    let _ = to.shutdown(Shutdown::Both);
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(a) = self.accept.take() {
            let _ = a.join();
        }
        let links = std::mem::take(&mut *self.threads.lock().unwrap_or_else(|e| e.into_inner()));
        for t in links {
            let _ = t.join();
        }
    }
}
