//! Pricing: on-demand prices from the AWS Price List API (behind the [`PricingApi`] trait, so
//! the SDK client, a recorded-response fake or a stub can serve it), spot prices from
//! DescribeSpotPriceHistory records, and the embedded us-east-1 snapshot as fallback.
//!
//! Upstream's rules: the Price List client lives in `us-east-1` (`ap-south-1` for `ap-*`,
//! `eu-central-1` for `eu-*`, `cn-northwest-1` for `cn-*`); on-demand prices come from two
//! paginated `GetProducts` queries (shared tenancy "Compute Instance" and dedicated "Compute
//! Instance (bare metal)"), both of which must return something, merged over the previous
//! prices; spot prices are per (type, zone), and before the first spot refresh a type's spot
//! price is its on-demand price. Both refresh every 12 hours.

use std::collections::BTreeMap;

use serde::Deserialize;

use crate::catalog::{CatalogError, EMBEDDED_PRICES, gunzip};

/// How often upstream refreshes prices.
pub const REFRESH_INTERVAL: std::time::Duration = std::time::Duration::from_secs(12 * 3600);

/// A `TERM_MATCH` filter of `GetProducts`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PriceFilter {
    /// `Field`.
    pub field: String,
    /// `Value`.
    pub value: String,
}

/// A `GetProducts` request (`ServiceCode=AmazonEC2`, `MaxResults=100`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GetProductsRequest {
    /// `ServiceCode`.
    pub service_code: String,
    /// `Filters` (all `TERM_MATCH`).
    pub filters: Vec<PriceFilter>,
    /// `MaxResults`.
    pub max_results: i32,
    /// `NextToken`.
    pub next_token: Option<String>,
}

/// One `GetProducts` page.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct GetProductsPage {
    /// `PriceList`: each element a JSON document as a string.
    #[serde(default)]
    pub price_list: Vec<String>,
    /// `NextToken`.
    #[serde(default)]
    pub next_token: Option<String>,
}

/// Pricing errors.
#[derive(Debug, thiserror::Error)]
pub enum PricingError {
    /// The API call failed.
    #[error("GetProducts: {0}")]
    Api(String),
    /// A query returned no usable price.
    #[error("no on-demand prices found for {0}")]
    Empty(String),
    /// No spot price record was usable.
    #[error("no spot pricing found")]
    NoSpotPrices,
    /// The embedded snapshot failed to load (a bug).
    #[error(transparent)]
    Embedded(#[from] CatalogError),
}

/// The Price List API.
#[async_trait::async_trait]
pub trait PricingApi: Send + Sync {
    /// One `GetProducts` call.
    async fn get_products(
        &self,
        request: &GetProductsRequest,
    ) -> Result<GetProductsPage, PricingError>;
}

/// The region of the Price List endpoint for `region`.
pub fn pricing_region(region: &str) -> &'static str {
    if region.starts_with("ap-") {
        "ap-south-1"
    } else if region.starts_with("cn-") {
        "cn-northwest-1"
    } else if region.starts_with("eu-") {
        "eu-central-1"
    } else {
        "us-east-1"
    }
}

/// The currency of prices in `region` (`CNY` in China, else `USD`).
pub fn currency(region: &str) -> &'static str {
    if region.starts_with("cn-") {
        "CNY"
    } else {
        "USD"
    }
}

/// The two on-demand queries' filters: shared tenancy "Compute Instance" and dedicated
/// "Compute Instance (bare metal)".
pub fn on_demand_filters(region: &str) -> [Vec<PriceFilter>; 2] {
    let f = |field: &str, value: &str| PriceFilter {
        field: field.into(),
        value: value.into(),
    };
    let common = vec![
        f("regionCode", region),
        f("serviceCode", "AmazonEC2"),
        f("preInstalledSw", "NA"),
        f("operatingSystem", "Linux"),
        f("capacitystatus", "Used"),
        f("marketoption", "OnDemand"),
    ];
    let mut shared = common.clone();
    shared.push(f("tenancy", "Shared"));
    shared.push(f("productFamily", "Compute Instance"));
    let mut metal = common;
    metal.push(f("tenancy", "Dedicated"));
    metal.push(f("productFamily", "Compute Instance (bare metal)"));
    [shared, metal]
}

#[derive(Deserialize)]
struct PriceItem {
    product: Product,
    #[serde(default)]
    terms: Terms,
}

#[derive(Deserialize)]
struct Product {
    attributes: BTreeMap<String, String>,
}

#[derive(Deserialize, Default)]
struct Terms {
    #[serde(rename = "OnDemand", default)]
    on_demand: BTreeMap<String, Term>,
}

#[derive(Deserialize)]
struct Term {
    #[serde(rename = "priceDimensions", default)]
    price_dimensions: BTreeMap<String, Dimension>,
}

#[derive(Deserialize)]
struct Dimension {
    #[serde(rename = "pricePerUnit", default)]
    price_per_unit: BTreeMap<String, String>,
}

/// Prices of one page's `PriceList`: instance type → price per hour in `currency`; items that
/// do not decode, have no instance type, or whose prices are zero or unparseable are skipped;
/// the last non-zero price of a type wins.
pub fn parse_price_list(items: &[String], currency: &str) -> BTreeMap<String, f64> {
    let mut out = BTreeMap::new();
    for raw in items {
        let Ok(item) = serde_json::from_str::<PriceItem>(raw) else {
            continue;
        };
        let Some(ty) = item.product.attributes.get("instanceType") else {
            continue;
        };
        for term in item.terms.on_demand.values() {
            for dim in term.price_dimensions.values() {
                if let Some(p) = dim
                    .price_per_unit
                    .get(currency)
                    .and_then(|p| p.parse::<f64>().ok())
                    .filter(|p| p.is_finite() && *p > 0.0)
                {
                    out.insert(ty.clone(), p);
                }
            }
        }
    }
    out
}

async fn query(
    api: &dyn PricingApi,
    filters: Vec<PriceFilter>,
    currency: &str,
) -> Result<BTreeMap<String, f64>, PricingError> {
    let mut out = BTreeMap::new();
    let mut request = GetProductsRequest {
        service_code: "AmazonEC2".into(),
        filters,
        max_results: 100,
        next_token: None,
    };
    loop {
        let page = api.get_products(&request).await?;
        out.extend(parse_price_list(&page.price_list, currency));
        match page.next_token.filter(|t| !t.is_empty()) {
            Some(t) => request.next_token = Some(t),
            None => return Ok(out),
        }
    }
}

/// Fetches the on-demand prices of `region`: both queries, paginated; an empty result of
/// either is an error.
pub async fn fetch_on_demand(
    api: &dyn PricingApi,
    region: &str,
) -> Result<BTreeMap<String, f64>, PricingError> {
    let [shared, metal] = on_demand_filters(region);
    let cur = currency(region);
    let a = query(api, shared, cur).await?;
    if a.is_empty() {
        return Err(PricingError::Empty("shared-tenancy instances".into()));
    }
    let b = query(api, metal, cur).await?;
    if b.is_empty() {
        return Err(PricingError::Empty("bare-metal instances".into()));
    }
    let mut out = a;
    out.extend(b);
    Ok(out)
}

/// One DescribeSpotPriceHistory record.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct SpotPriceRecord {
    /// `InstanceType`.
    #[serde(default)]
    pub instance_type: String,
    /// `AvailabilityZone`.
    #[serde(default)]
    pub availability_zone: String,
    /// `SpotPrice`.
    #[serde(default)]
    pub spot_price: String,
    /// `Timestamp` (RFC 3339).
    #[serde(default)]
    pub timestamp: Option<String>,
}

/// Spot prices per (type, zone) from history records: records without a timestamp or with an
/// unparseable price are skipped; the newest record of a (type, zone) wins. Nothing usable is
/// an error.
pub fn spot_prices(
    records: &[SpotPriceRecord],
) -> Result<BTreeMap<(String, String), f64>, PricingError> {
    let mut best: BTreeMap<(String, String), (jiff::Timestamp, f64)> = BTreeMap::new();
    for r in records {
        let Some(ts) = r
            .timestamp
            .as_deref()
            .and_then(|t| t.parse::<jiff::Timestamp>().ok())
        else {
            continue;
        };
        let Some(price) = r.spot_price.parse::<f64>().ok().filter(|p| p.is_finite()) else {
            continue;
        };
        let key = (r.instance_type.clone(), r.availability_zone.clone());
        match best.get(&key) {
            Some((t, _)) if *t >= ts => {}
            _ => {
                best.insert(key, (ts, price));
            }
        }
    }
    if best.is_empty() {
        return Err(PricingError::NoSpotPrices);
    }
    Ok(best.into_iter().map(|(k, (_, p))| (k, p)).collect())
}

/// The on-demand prices embedded in the crate (us-east-1, the fallback for every region).
pub fn embedded_on_demand_prices() -> Result<BTreeMap<String, f64>, PricingError> {
    #[derive(Deserialize)]
    struct PriceFile {
        prices: BTreeMap<String, serde_json::Value>,
    }
    let raw = gunzip(EMBEDDED_PRICES, "embedded prices")?;
    let file: PriceFile = serde_json::from_slice(&raw).map_err(|source| {
        PricingError::Embedded(CatalogError::Parse {
            what: "on-demand prices",
            source,
        })
    })?;
    Ok(file
        .prices
        .into_iter()
        .filter_map(|(k, v)| v.as_f64().filter(|p| *p > 0.0).map(|p| (k, p)))
        .collect())
}

/// The provider's price state.
#[derive(Debug, Clone, PartialEq)]
pub struct Prices {
    on_demand: BTreeMap<String, f64>,
    spot: BTreeMap<(String, String), f64>,
    spot_updated: bool,
}

impl Prices {
    /// Starts from the embedded snapshot.
    pub fn embedded() -> Result<Self, PricingError> {
        Ok(Self::from_static(embedded_on_demand_prices()?))
    }

    /// Starts from `on_demand` static prices.
    pub fn from_static(on_demand: BTreeMap<String, f64>) -> Self {
        Prices {
            on_demand,
            spot: BTreeMap::new(),
            spot_updated: false,
        }
    }

    /// Merges a successful on-demand refresh over the current prices; an error keeps them.
    pub fn update_on_demand(&mut self, result: Result<BTreeMap<String, f64>, PricingError>) {
        if let Ok(prices) = result {
            self.on_demand.extend(prices);
        }
    }

    /// Replaces the spot prices after a successful refresh (an error keeps them).
    pub fn update_spot(&mut self, result: Result<BTreeMap<(String, String), f64>, PricingError>) {
        if let Ok(prices) = result {
            self.spot = prices;
            self.spot_updated = true;
        }
    }

    /// The on-demand price of a type.
    pub fn on_demand_price(&self, instance_type: &str) -> Option<f64> {
        self.on_demand.get(instance_type).copied()
    }

    /// The spot price of a type in a zone: before the first spot refresh the on-demand price;
    /// after it, only zones present in the data have a price.
    pub fn spot_price(&self, instance_type: &str, zone: &str) -> Option<f64> {
        if !self.spot_updated {
            return self.on_demand_price(instance_type);
        }
        self.spot
            .get(&(instance_type.to_string(), zone.to_string()))
            .copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    /// Serves recorded pages and records the requests.
    struct Recorded {
        pages: BTreeMap<(String, Option<String>), &'static str>,
        seen: Mutex<Vec<GetProductsRequest>>,
    }

    #[async_trait::async_trait]
    impl PricingApi for Recorded {
        async fn get_products(
            &self,
            request: &GetProductsRequest,
        ) -> Result<GetProductsPage, PricingError> {
            self.seen.lock().unwrap().push(request.clone());
            let family = request
                .filters
                .iter()
                .find(|f| f.field == "productFamily")
                .map(|f| f.value.clone())
                .unwrap_or_default();
            let body = self
                .pages
                .get(&(family, request.next_token.clone()))
                .ok_or_else(|| PricingError::Api("unexpected request".into()))?;
            serde_json::from_str(body).map_err(|e| PricingError::Api(e.to_string()))
        }
    }

    fn recorded() -> Recorded {
        let mut pages = BTreeMap::new();
        pages.insert(
            ("Compute Instance".to_string(), None),
            include_str!("../tests/fixtures/pricing/get-products-shared-page1.json"),
        );
        pages.insert(
            ("Compute Instance".to_string(), Some("page-2".to_string())),
            include_str!("../tests/fixtures/pricing/get-products-shared-page2.json"),
        );
        pages.insert(
            ("Compute Instance (bare metal)".to_string(), None),
            include_str!("../tests/fixtures/pricing/get-products-metal.json"),
        );
        Recorded {
            pages,
            seen: Mutex::new(Vec::new()),
        }
    }

    #[test]
    fn regions_and_filters() {
        assert_eq!(pricing_region("us-west-2"), "us-east-1");
        assert_eq!(pricing_region("ap-northeast-1"), "ap-south-1");
        assert_eq!(pricing_region("eu-west-1"), "eu-central-1");
        assert_eq!(pricing_region("cn-north-1"), "cn-northwest-1");
        assert_eq!(currency("cn-north-1"), "CNY");
        let [shared, metal] = on_demand_filters("us-west-2");
        assert_eq!(shared.len(), 8);
        assert!(shared.contains(&PriceFilter {
            field: "regionCode".into(),
            value: "us-west-2".into()
        }));
        assert!(metal.contains(&PriceFilter {
            field: "tenancy".into(),
            value: "Dedicated".into()
        }));
    }

    #[test]
    fn on_demand_prices_from_recorded_responses() {
        let api = recorded();
        let prices = futures::executor::block_on(fetch_on_demand(&api, "us-east-1")).unwrap();
        assert_eq!(prices.get("m5.large"), Some(&0.096));
        assert_eq!(prices.get("c5.large"), Some(&0.085));
        assert_eq!(prices.get("m7g.large"), Some(&0.0816));
        assert_eq!(prices.get("m5.metal"), Some(&4.608));
        assert!(!prices.contains_key("t3.nano"), "zero prices are skipped");
        assert!(
            !prices.contains_key("r5.large"),
            "unparseable prices are skipped"
        );
        let seen = api.seen.lock().unwrap();
        assert_eq!(seen.len(), 3);
        assert_eq!(seen[0].max_results, 100);
        assert_eq!(seen[1].next_token.as_deref(), Some("page-2"));
    }

    #[test]
    fn an_empty_query_is_an_error_and_keeps_the_previous_prices() {
        let mut api = recorded();
        api.pages.insert(
            ("Compute Instance (bare metal)".to_string(), None),
            r#"{"FormatVersion":"aws_v1","PriceList":[]}"#,
        );
        let result = futures::executor::block_on(fetch_on_demand(&api, "us-east-1"));
        assert!(matches!(result, Err(PricingError::Empty(_))));
        let mut prices = Prices::from_static([("m5.large".to_string(), 0.1)].into());
        prices.update_on_demand(result);
        assert_eq!(prices.on_demand_price("m5.large"), Some(0.1));
        let ok = futures::executor::block_on(fetch_on_demand(&recorded(), "us-east-1"));
        prices.update_on_demand(ok);
        assert_eq!(prices.on_demand_price("m5.large"), Some(0.096));
    }

    #[test]
    fn spot_prices_newest_record_per_zone() {
        #[derive(Deserialize)]
        #[serde(rename_all = "PascalCase")]
        struct Out {
            spot_price_history: Vec<SpotPriceRecord>,
        }
        let out: Out = serde_json::from_str(include_str!(
            "../tests/fixtures/pricing/describe-spot-price-history.json"
        ))
        .unwrap();
        let spot = spot_prices(&out.spot_price_history).unwrap();
        let get = |t: &str, z: &str| spot.get(&(t.to_string(), z.to_string())).copied();
        assert_eq!(get("m5.large", "us-east-1a"), Some(0.0382));
        assert_eq!(get("m5.large", "us-east-1b"), Some(0.0365));
        assert_eq!(get("c5.large", "us-east-1a"), None, "bad price");
        assert_eq!(get("c5.large", "us-east-1c"), None, "no timestamp");
        assert_eq!(
            get("c5.large", "us-east-1d"),
            Some(0.031),
            "moto's nine-digit timestamp"
        );
        assert!(matches!(spot_prices(&[]), Err(PricingError::NoSpotPrices)));

        let mut prices = Prices::from_static([("m5.large".to_string(), 0.096)].into());
        assert_eq!(
            prices.spot_price("m5.large", "us-east-1c"),
            Some(0.096),
            "before the first refresh"
        );
        prices.update_spot(Ok(spot));
        assert_eq!(prices.spot_price("m5.large", "us-east-1a"), Some(0.0382));
        assert_eq!(
            prices.spot_price("m5.large", "us-east-1c"),
            None,
            "after it, only zones with data"
        );
    }

    #[test]
    fn embedded_snapshot_is_the_fallback() {
        let p = Prices::embedded().unwrap();
        assert!(p.on_demand_price("m5.large").is_some_and(|x| x > 0.0));
    }
}
