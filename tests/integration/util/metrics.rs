//! Reading the server's Prometheus text (`/metrics`); the API bench shares this file.

/// The totals of a histogram's `_sum` and `_count` series, over all their labels.
pub fn histogram_totals(text: &str, name: &str) -> (f64, f64) {
    let total = |suffix: &str| -> f64 {
        let series = format!("{name}_{suffix}{{");
        text.lines()
            .filter(|l| l.starts_with(&series))
            .filter_map(|l| l.rsplit_once(' ')?.1.parse::<f64>().ok())
            .sum()
    };
    (total("sum"), total("count"))
}

/// A gauge's value (the first series of that name); 0 when it is not there.
pub fn gauge(text: &str, name: &str) -> f64 {
    text.lines()
        .find(|l| l.strip_prefix(name).is_some_and(|rest| rest.starts_with([' ', '{'])))
        .and_then(|l| l.rsplit_once(' ')?.1.parse().ok())
        .unwrap_or(0.0)
}
