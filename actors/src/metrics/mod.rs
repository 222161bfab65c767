//! The resource metrics pipeline (what metrics-server does for `kubectl top`): the
//! [`scraper::MetricsScraper`] actor reads every Ready node agent's `/stats/summary` each
//! resolution, keeps the last two readings of each node and container, and answers the
//! metrics.k8s.io `NodeMetrics` and `PodMetrics` from them: CPU as the rate between the two
//! readings, memory as the last working set.
//!
//! How a summary is fetched is the embedder's ([`SummarySource`]): the server reaches agents
//! over HTTP.

pub mod scraper;

use async_trait::async_trait;
use serde_json::Value;

pub use scraper::{MetricsScraper, NodeMetricsOf, PodMetricsOf, ScraperConfig, StopMetricsScraper};

/// Where the scraper gets a node agent's summary from.
#[async_trait]
pub trait SummarySource: Send + Sync {
    /// The `/stats/summary` of the agent of `node` (the Node object), or why not.
    async fn summary(&self, node: &Value) -> Result<Value, String>;
}
