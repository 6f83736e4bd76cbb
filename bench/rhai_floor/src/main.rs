//! Rhai's own cost per script-function call and per `split`, on a plain
//! engine (no brisk): the floor under brisk's closure path.

fn main() -> Result<(), Box<rhai::EvalAltResult>> {
    let mut engine = rhai::Engine::new();
    // `progress` adds a callback at every operation, as brisk's engines have.
    let progress = std::env::args().nth(1).is_some();
    if progress {
        engine.on_progress(|_| None);
    }
    let calls = 3_600_000;
    let t = std::time::Instant::now();
    engine.run(&format!("fn f(x) {{ x }} for i in 0..{calls} {{ f(i) }}"))?;
    let per_call = t.elapsed().as_nanos() as f64 / calls as f64;
    let splits = 1_000_000;
    let t = std::time::Instant::now();
    engine.run(&format!(
        r#"let s = "alpha beta gamma delta epsilon zeta eta theta iota kappa"; for i in 0..{splits} {{ s.split(" ") }}"#
    ))?;
    let per_split = t.elapsed().as_nanos() as f64 / splits as f64;
    println!(
        "{{\"progress\": {progress}, \"ns_per_call\": {per_call:.0}, \"ns_per_split_of_10_words\": {per_split:.0}}}"
    );
    Ok(())
}
