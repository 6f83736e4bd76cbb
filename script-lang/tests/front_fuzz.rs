//! A property test of the script front end: random bytes and truncated,
//! cut and garbled scripts go through everything a front end calls on what
//! a person types (the multi-line check, completion, evaluation) for a few
//! seconds. Each must give a value or an error, never a panic (which the
//! session turns into an `Internal` error) and never a hang (an input that
//! runs on is interrupted, as Ctrl-C would, and must stop).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use brisk_script::input::input_state;
use brisk_script::{ErrorKind, Session};

/// Scripts to take apart: the syntax and the API a session sees most.
/// Sizes stay small, so no mutation can ask for much memory (mutations
/// never add digits).
const CORPUS: &[&str] = &[
    "let x = 1 + 2 * 3; x",
    "fn f(a, b) { a + b } f(1, 2)",
    "let m = #{a: 1, b: [1, 2, 3], c: \"s\"}; m.b[1] + m.a",
    "let s = \"héllo\"; s.len() + s.sub_string(1, 2).len()",
    "let v = []; for i in 0..5 { v.push(i * i); } v",
    "let i = 0; while i < 5 { i += 1; } i",
    "if 1 < 2 { \"yes\" } else { \"no\" }",
    "switch 3 { 1 => \"a\", 3 => \"c\", _ => \"z\" }",
    "try { throw \"boom\"; } catch (e) { e }",
    "let g = |x| x * 2; g.call(21)",
    "let d = delayed(|x| x + 1).call(41); d.compute()",
    "compute(delayed(|a, b| a * b).call(6, 7), 1)",
    "let f = submit(|x| x + 1, 1); f.result()",
    "gather(map(|x| x * 2, [1, 2, 3]))",
    "let a = from_array([1.0, 2.0, 3.0, 4.0], #{chunks: 2}); (a + 1).sum().compute()",
    "from_array([[1, 2], [3, 4]]).T.compute()",
    "from_sequence([1, 2, 3, 4], #{npartitions: 2}).map(|x| x + 1).filter(|x| x > 2).compute()",
    "from_sequence([\"a b\", \"b c\"]).map(|s| s.split(\" \")).flatten().frequencies().compute()",
    "let df = from_records([#{k: \"a\", v: 1}, #{k: \"b\", v: 2}, #{k: \"a\", v: 3}]); df.groupby(\"k\").sum().compute()",
    "from_records([#{x: 1.5}, #{x: 2.5}])[\"x\"].mean().compute()",
    "config(#{scheduler: \"sync\"}); delayed(|x| x).call(1).compute()",
    "annotate(#{priority: 1}, || delayed(|x| x).call(2)).compute()",
    "to_json(#{a: [1, 2.5], b: \"x\"})",
    "let r = `x = ${1 + 1}`; r",
    "print(\"p\"); debug(\"d\"); 1",
    "let arr = [3, 1, 2]; arr.sort(); arr.reverse(); arr",
    "fn fact(n) { if n <= 1 { 1 } else { n * fact(n - 1) } } fact(10)",
    "let o = #{}; o.x = 1; o[\"y\"] = 2; o.keys()",
    "const C = 5; let z = C ** 2 % 7; z",
    "let t = true && !false || 1 != 2; t",
];

/// Pieces put into scripts at random: brackets, quotes, operators,
/// keywords and API names, none of them digits.
const TOKENS: &[&str] = &[
    "(",
    ")",
    "[",
    "]",
    "{",
    "}",
    "#{",
    "\"",
    "'",
    "`",
    "${",
    ";",
    ",",
    ".",
    "..",
    "..=",
    "=",
    "==",
    "+",
    "-",
    "*",
    "/",
    "%",
    "**",
    "<<",
    ">>",
    "&",
    "|",
    "^",
    "!",
    "?",
    "?.",
    "??",
    ":",
    "::",
    "=>",
    "|x|",
    "||",
    "fn ",
    "let ",
    "const ",
    "if ",
    "else ",
    "while ",
    "loop ",
    "for ",
    " in ",
    "return ",
    "throw ",
    "try ",
    "catch ",
    "switch ",
    "this",
    "true",
    "false",
    "()",
    ".call(",
    ".compute()",
    ".result()",
    "delayed(",
    "submit(",
    "compute(",
    "from_array(",
    "from_sequence(",
    "gather(",
    "map(",
    "\\",
    "\n",
    "\t",
    "é",
    "😀",
    "\u{0}",
    "\u{feff}",
    "//",
    "/*",
    "*/",
];

/// xorshift64*: the same sequence every run, so a failure can be replayed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

/// One garbled input: raw bytes, decoded the way a front end refuses or
/// takes them (only UTF-8 reaches a session; the rest is decoded lossily
/// here so that the bytes still get in).
fn garble(rng: &mut Rng) -> String {
    let mut bytes = CORPUS[rng.below(CORPUS.len())].as_bytes().to_vec();
    for _ in 0..1 + rng.below(4) {
        let at = rng.below(bytes.len() + 1);
        match rng.below(6) {
            // Truncated, as an unfinished input.
            0 => bytes.truncate(at),
            // A range cut out.
            1 => {
                let end = (at + 1 + rng.below(8)).min(bytes.len());
                bytes.drain(at.min(end)..end);
            }
            // A token put in.
            2 | 3 => {
                let token = TOKENS[rng.below(TOKENS.len())].as_bytes();
                bytes.splice(at..at, token.iter().copied());
            }
            // Noise: random bytes, without digits.
            4 => {
                let noise: Vec<u8> = (0..1 + rng.below(6))
                    .map(|_| rng.next() as u8)
                    .map(|b| if b.is_ascii_digit() { b'x' } else { b })
                    .collect();
                bytes.splice(at..at, noise);
            }
            // A piece of another script.
            _ => {
                let other = CORPUS[rng.below(CORPUS.len())].as_bytes();
                let from = rng.below(other.len());
                let to = (from + rng.below(24)).min(other.len());
                bytes.splice(at..at, other[from..to].iter().copied());
            }
        }
    }
    if rng.below(10) == 0 {
        // Only noise.
        bytes = (0..rng.below(64)).map(|_| rng.next() as u8).filter(|b| !b.is_ascii_digit()).collect();
    }
    String::from_utf8_lossy(&bytes).into_owned()
}

/// Interrupts an input that has run longer than `limit`, as Ctrl-C would.
struct Watchdog {
    started_ms: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
    t0: Instant,
}

impl Watchdog {
    fn new(cancel: brisk_engine::CancelToken, limit: Duration) -> Watchdog {
        let started_ms = Arc::new(AtomicU64::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let t0 = Instant::now();
        let (s, halt) = (started_ms.clone(), stop.clone());
        let thread = std::thread::spawn(move || {
            while !halt.load(Ordering::Relaxed) {
                let started = s.load(Ordering::Relaxed);
                if started > 0 && t0.elapsed().as_millis() as u64 > started + limit.as_millis() as u64 {
                    cancel.cancel();
                }
                std::thread::sleep(Duration::from_millis(5));
            }
        });
        Watchdog { started_ms, stop, thread: Some(thread), t0 }
    }

    fn watch<T>(&self, f: impl FnOnce() -> T) -> T {
        self.started_ms.store(self.t0.elapsed().as_millis() as u64 + 1, Ordering::Relaxed);
        let out = f();
        self.started_ms.store(0, Ordering::Relaxed);
        out
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

#[test]
fn garbled_scripts_give_a_value_or_an_error() {
    let budget = Duration::from_secs(
        std::env::var("BRISK_FUZZ_SECONDS").ok().and_then(|s| s.parse().ok()).unwrap_or(3),
    );
    let seed = std::env::var("BRISK_FUZZ_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or(0x5eed_f00d);
    let mut rng = Rng(seed);
    let t0 = Instant::now();
    let (mut runs, mut errors) = (0usize, 0usize);
    while t0.elapsed() < budget {
        // A fresh session now and then: what garbled inputs define stays bounded.
        let mut session = Session::new();
        session.set_output(Arc::new(|_: &str| {}));
        session.set_debug_output(Arc::new(|_: &str| {}));
        let watchdog = Watchdog::new(session.cancel_token(), Duration::from_millis(300));
        for _ in 0..100 {
            let text = garble(&mut rng);
            let _ = input_state(&text);
            let mut pos = rng.below(text.len() + 1);
            while !text.is_char_boundary(pos) {
                pos -= 1;
            }
            let _ = session.complete(&text, pos);
            let t = Instant::now();
            let result = watchdog.watch(|| session.eval(&text, "<fuzz>"));
            assert!(t.elapsed() < Duration::from_secs(10), "took {:?}: {text:?}", t.elapsed());
            runs += 1;
            if let Err(e) = result {
                errors += 1;
                assert_ne!(e.kind, ErrorKind::Internal, "a panic in brisk on {text:?}: {e}");
                assert!(!e.message.is_empty(), "an empty message for {text:?}");
            }
        }
        drop(watchdog);
        let two = session.eval_value("1 + 1", "<after>").expect("the session still works");
        assert_eq!(two.as_int().ok(), Some(2));
    }
    eprintln!("{runs} garbled inputs in {:?}, {errors} errors, seed {seed}", t0.elapsed());
    assert!(runs >= 100, "only {runs} inputs ran");
}
