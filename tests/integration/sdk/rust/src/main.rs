//! CPU in `ember_busy_rust` under the tag request=busy, for SDK_SECONDS,
//! uploads every 2 s to SDK_URL as SDK_APP, then a clean shutdown.
use std::time::{Duration, Instant};

use pyroscope::backend::{pprof_backend, BackendConfig, PprofConfig};
use pyroscope::pyroscope::PyroscopeAgentBuilder;

/// Only operators, no calls: an inlined helper would get the self time.
#[inline(never)]
fn ember_busy_rust(n: u64) -> u64 {
    let mut h: u64 = 1469598103934665603;
    for i in 0..n {
        h ^= h << 13;
        h ^= h >> 7;
        h ^= h << 17;
        h ^= i;
    }
    h
}

fn main() {
    let url = std::env::var("SDK_URL").expect("SDK_URL");
    let app = std::env::var("SDK_APP").expect("SDK_APP");
    let secs: u64 = std::env::var("SDK_SECONDS").ok().and_then(|s| s.parse().ok()).unwrap_or(6);
    let backend = pprof_backend(PprofConfig { sample_rate: 100 }, BackendConfig::default());
    let agent = PyroscopeAgentBuilder::new(&url, &app, 100, "pyroscope-rs", "2.1.5", backend)
        .tags(vec![("env", "sdk-test")])
        .upload_interval(Duration::from_secs(2))
        .build()
        .expect("build");
    let agent = agent.start().expect("start");
    let (add_tag, remove_tag) = agent.tag_wrapper();
    add_tag("request".to_string(), "busy".to_string()).expect("tag");
    let deadline = Instant::now() + Duration::from_secs(secs);
    let mut x = 0u64;
    while Instant::now() < deadline {
        x ^= ember_busy_rust(5_000_000);
    }
    remove_tag("request".to_string(), "busy".to_string()).expect("untag");
    println!("{x}");
    let agent = agent.stop().expect("stop");
    agent.shutdown();
}
