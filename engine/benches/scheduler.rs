//! Scheduler-core throughput: drive the pure state machine with simulated
//! workers (no threads, no I/O) through a 1,000,000-task graph on 1,000
//! workers, and report task transitions per second. Target: at least
//! 1,000,000 transitions/s. Prints one JSON line on stdout.
//!
//! `cargo bench -p brisk-engine --bench scheduler [-- TASKS WORKERS]`

use std::collections::VecDeque;
use std::time::Instant;

use brisk_engine::Key;
use brisk_engine::scheduler::{Action, NewTask, Scheduler, SchedulerConfig, WorkerSpec};

/// `leaves` independent tasks plus a pairwise tree reduction over them.
fn tree(leaves: usize) -> (Vec<NewTask>, Key) {
    let mut tasks = Vec::with_capacity(2 * leaves);
    let mut layer: Vec<Key> = Vec::with_capacity(leaves);
    for i in 0..leaves {
        let key = Key::new(format!("inc-{i:016x}"));
        tasks.push(NewTask { key: key.clone(), deps: vec![], order: 0, annotations: None });
        layer.push(key);
    }
    let mut level = 0;
    while layer.len() > 1 {
        let mut next = Vec::with_capacity(layer.len() / 2 + 1);
        for (j, pair) in layer.chunks(2).enumerate() {
            if let [a, b] = pair {
                let key = Key::new(format!("add-{level:04x}{j:012x}"));
                tasks.push(NewTask {
                    key: key.clone(),
                    deps: vec![a.clone(), b.clone()],
                    order: 0,
                    annotations: None,
                });
                next.push(key);
            } else {
                next.push(pair[0].clone());
            }
        }
        layer = next;
        level += 1;
    }
    // Breadth-first priorities (all leaves, then each level): the order
    // matters little for throughput, only that every task has one.
    for (i, t) in tasks.iter_mut().enumerate() {
        t.order = i as u32;
    }
    (tasks, layer.remove(0))
}

fn run(ntasks: usize, nworkers: usize, story: usize) -> (f64, u64, f64) {
    let (tasks, out) = tree(ntasks / 2);
    let mut s = Scheduler::new(SchedulerConfig { story_capacity: story, ..SchedulerConfig::default() });
    let mut actions = Vec::new();
    let workers: Vec<_> = (0..nworkers)
        .map(|i| {
            s.add_worker(WorkerSpec { name: format!("w{i}"), nthreads: 1, resources: vec![] }, &mut actions)
        })
        .collect();
    let t0 = Instant::now();
    s.submit(tasks, &[out], &mut actions).expect("valid graph");
    let submitted = t0.elapsed().as_secs_f64();
    let mut running = VecDeque::new();
    let mut done = false;
    while !done {
        for a in actions.drain(..) {
            match a {
                Action::Run { worker, task, run, .. } => running.push_back((worker, task, run)),
                Action::Done { .. } => done = true,
                _ => {}
            }
        }
        let Some((w, t, run)) = running.pop_front() else { break };
        s.task_finished(w, t, run, 8, 10.0, &mut actions);
    }
    let secs = t0.elapsed().as_secs_f64();
    assert!(done, "the graph did not finish");
    assert_eq!(workers.len(), nworkers);
    (secs, s.transition_count(), submitted)
}

fn main() {
    let args: Vec<usize> = std::env::args().skip(1).filter_map(|a| a.parse().ok()).collect();
    let ntasks = args.first().copied().unwrap_or(1_000_000);
    let nworkers = args.get(1).copied().unwrap_or(1_000);
    let (secs, transitions, submit) = run(ntasks, nworkers, 10_000);
    let (secs_nostory, transitions2, _) = run(ntasks, nworkers, 0);
    println!(
        "{{\"bench\": \"scheduler-core\", \"tasks\": {}, \"workers\": {nworkers}, \"transitions\": {transitions}, \"seconds\": {secs:.3}, \"submit_seconds\": {submit:.3}, \"transitions_per_second\": {:.0}, \"transitions_per_second_story_off\": {:.0}}}",
        ntasks - 1,
        transitions as f64 / secs,
        transitions2 as f64 / secs_nostory
    );
}
