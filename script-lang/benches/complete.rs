//! REPL responsiveness with a crowded session (issue 6: completion stays
//! instant with 1,000 variables in scope). Defines 1,000 variables, then
//! times the completions a person triggers most: a name, a method after
//! a dot, an option key, and an input-state check (the multi-line
//! validator, run on every Enter). Prints one JSON line of medians in µs.
//!
//! `cargo bench -p brisk-script --bench complete`

use std::time::Instant;

use brisk_script::Session;

fn median_us(mut f: impl FnMut()) -> f64 {
    let mut times: Vec<f64> = (0..200)
        .map(|_| {
            let t0 = Instant::now();
            f();
            t0.elapsed().as_secs_f64() * 1e6
        })
        .collect();
    times.sort_by(f64::total_cmp);
    times[times.len() / 2]
}

fn main() {
    let mut session = Session::new();
    let defs: String = (0..1000).map(|i| format!("let var_{i} = {i};\n")).collect();
    let _ = session.eval(&defs, "<defs>").expect("define variables");
    let _ = session.eval("let x = random([100, 100], #{chunks: 10});", "<x>").expect("array");
    let check = |line: &str, expect: &str| {
        let got = session.complete(line, line.len());
        assert!(got.candidates.iter().any(|c| c == expect), "{line:?} should offer {expect:?}: {got:?}");
    };
    check("var_99", "var_999");
    check("x.rech", "rechunk");
    check("random([10], #{ch", "chunks");
    let name = median_us(|| {
        session.complete("var_5", 5);
    });
    let method = median_us(|| {
        session.complete("x.su", 4);
    });
    let option = median_us(|| {
        session.complete("random([10], #{ch", 17);
    });
    let input = "fn f(a) {\n  let b = [1, 2, #{k: \"v\"}];\n  b.len()\n}";
    let state = median_us(|| {
        std::hint::black_box(brisk_script::input::input_state(input));
    });
    println!(
        "{{\"bench\": \"complete\", \"variables\": 1000, \"name_us\": {name:.1}, \"method_us\": {method:.1}, \"option_us\": {option:.1}, \"input_state_us\": {state:.1}}}"
    );
}
