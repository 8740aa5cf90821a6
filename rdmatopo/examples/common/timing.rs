//! Timing for the bench examples: each closure run `rounds` times, reported as
//! min / median / max milliseconds.

use std::time::{Duration, Instant};

fn stats(mut v: Vec<Duration>) -> String {
    v.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    format!(
        "min {:.3} ms, median {:.3} ms, max {:.3} ms over {} runs",
        ms(v[0]),
        ms(v[v.len() / 2]),
        ms(v[v.len() - 1]),
        v.len()
    )
}

pub fn time<T>(rounds: usize, mut f: impl FnMut() -> T) -> String {
    let mut v = Vec::with_capacity(rounds);
    for _ in 0..rounds {
        let t = Instant::now();
        std::hint::black_box(f());
        v.push(t.elapsed());
    }
    stats(v)
}
