//! Rhai's functions that allocate as much as the script asks for (`blob(n)`,
//! `pad(n, ...)`), registered again with a memory check first: an
//! allocation that fails aborts the process, so a size that cannot fit is
//! refused before it is tried. Rhai's own size limits would do this, but they
//! re-measure a whole array after every `push` (quadratic) and panic on
//! shared values inside data, so brisk leaves them off and counts the heap
//! instead (`memory::check_step`, in the progress hook).

use brisk_engine::memory;
use rhai::{Array as RArray, Blob, Dynamic, Engine, EvalAltResult, INT, ImmutableString};

type Res<T> = Result<T, Box<EvalAltResult>>;

fn fits(n: INT, each: usize, what: &str) -> Res<usize> {
    let n = usize::try_from(n.max(0)).unwrap_or(usize::MAX);
    memory::check(memory::times(n as u64, each as u64), || format!("{what} of {n} items"))
        .map_err(|e| crate::error::runtime(e.to_string()))?;
    Ok(n)
}

pub(super) fn register(engine: &mut Engine) {
    engine.register_fn("blob", |n: INT| -> Res<Blob> { Ok(vec![0; fits(n, 1, "blob")?]) });
    engine.register_fn("blob", |n: INT, v: INT| -> Res<Blob> {
        Ok(vec![(v & 0xff) as u8; fits(n, 1, "blob")?])
    });
    engine.register_fn("pad", |b: &mut Blob, n: INT, v: INT| -> Res<()> {
        let n = fits(n, 1, "pad")?;
        if n > b.len() {
            b.resize(n, (v & 0xff) as u8);
        }
        Ok(())
    });
    engine.register_fn("pad", |a: &mut RArray, n: INT, item: Dynamic| -> Res<()> {
        let n = fits(n, std::mem::size_of::<Dynamic>(), "pad")?;
        if n > a.len() {
            a.resize(n, item);
        }
        Ok(())
    });
    engine.register_fn("pad", |s: &mut ImmutableString, n: INT, c: char| -> Res<()> {
        let n = fits(n, c.len_utf8(), "pad")?;
        let have = s.chars().count();
        if n > have {
            let p = s.make_mut();
            p.extend(std::iter::repeat_n(c, n - have));
        }
        Ok(())
    });
    engine.register_fn("pad", |s: &mut ImmutableString, n: INT, padding: &str| -> Res<()> {
        let n = fits(n, padding.len().max(1), "pad")?;
        let mut have = s.chars().count();
        if n <= have || padding.is_empty() {
            return Ok(());
        }
        let plen = padding.chars().count();
        let p = s.make_mut();
        while have < n {
            if have + plen <= n {
                p.push_str(padding);
                have += plen;
            } else {
                p.extend(padding.chars().take(n - have));
                have = n;
            }
        }
        Ok(())
    });
}

#[cfg(test)]
mod tests {
    #[test]
    fn sized_builtins_keep_rhai_semantics_and_refuse_what_cannot_fit() {
        // Rhai hashes function names under a seed other tests of this binary
        // fix (`ship::init`): fixed first, or a call could miss a function
        // registered under the seed before.
        crate::ship::init();
        let mut e = rhai::Engine::new();
        super::register(&mut e);
        let r = |s: &str| e.eval::<rhai::Dynamic>(s).map(|d| d.to_string()).map_err(|e| e.to_string());
        assert_eq!(r("let s = \"ab\"; s.pad(5, '-'); s").as_deref(), Ok("ab---"));
        assert_eq!(r("let s = \"ab\"; s.pad(7, \"xy\"); s").as_deref(), Ok("abxyxyx"));
        assert_eq!(r("let a = [1]; a.pad(3, 0); a").as_deref(), Ok("[1, 0, 0]"));
        assert_eq!(r("blob(3, 0x41).len()").as_deref(), Ok("3"));
        let err = r("blob(100000000000000)").expect_err("too big");
        assert!(err.contains("not enough memory: blob of 100000000000000 items needed"), "{err}");
        let err = r("let s = \"\"; s.pad(100000000000000, 'x')").expect_err("too big");
        assert!(err.contains("not enough memory: pad of"), "{err}");
    }
}
