//! Periodic work beside launching: launch-template cleanup (expired templates, a deleted
//! class's templates, stale templates found at start) and the on-demand / spot price refresh.

use super::*;
use crate::pricing::{PricingApi, PricingError};

/// How often on-demand and spot prices are refreshed (upstream: 12 hours).
pub const PRICE_REFRESH_INTERVAL: Duration = Duration::from_secs(12 * 3600);

/// The prefix of the launch templates the provider creates.
pub const LAUNCH_TEMPLATE_PREFIX: &str = "karpenter.k8s.aws/";

/// A launch template of this cluster as DescribeLaunchTemplates lists it.
struct Listed {
    name: String,
    tags: BTreeMap<String, String>,
}

impl AwsCloudProvider {
    /// This cluster's launch templates (DescribeLaunchTemplates by the cluster tag, 200 a
    /// page; the tags and the name prefix are checked here too, since not every EC2 emulation
    /// applies tag filters).
    async fn cluster_launch_templates(&self) -> Result<Vec<Listed>, CloudProviderError> {
        let mut out = Vec::new();
        let mut token = None;
        loop {
            self.counters
                .describe_launch_templates
                .fetch_add(1, Ordering::Relaxed);
            let page = self
                .clients
                .ec2
                .describe_launch_templates()
                .filters(
                    ec2::Filter::builder()
                        .name(format!("tag:{}", launch::CLUSTER_NAME_TAG))
                        .values(&self.options.cluster_name)
                        .build(),
                )
                .max_results(200)
                .set_next_token(token)
                .send()
                .await
                .map_err(api_error("DescribeLaunchTemplates"))?;
            for t in page.launch_templates() {
                let tags = convert::tags(t.tags());
                let name = t.launch_template_name().unwrap_or_default();
                if name.starts_with(LAUNCH_TEMPLATE_PREFIX)
                    && tags.get(launch::CLUSTER_NAME_TAG) == Some(&self.options.cluster_name)
                {
                    out.push(Listed {
                        name: name.to_string(),
                        tags,
                    });
                }
            }
            token = page
                .next_token()
                .filter(|t| !t.is_empty())
                .map(str::to_string);
            if token.is_none() {
                return Ok(out);
            }
        }
    }

    async fn delete_launch_template(&self, name: &str) -> Result<(), CloudProviderError> {
        self.counters
            .delete_launch_template
            .fetch_add(1, Ordering::Relaxed);
        match self
            .clients
            .ec2
            .delete_launch_template()
            .launch_template_name(name)
            .send()
            .await
        {
            Ok(_) => Ok(()),
            Err(e) => {
                let (code, message) = error_code(&e);
                // Already gone (moto answers a missing name with MissingParameter).
                if code == "InvalidLaunchTemplateName.NotFoundException"
                    || code == "InvalidLaunchTemplateId.NotFound"
                    || code == "MissingParameter"
                {
                    Ok(())
                } else {
                    Err(other("DeleteLaunchTemplate", &code, &message))
                }
            }
        }
    }

    /// Start-up (after winning leader election): this cluster's launch templates enter the
    /// cache as just used, so the ones no launch uses again are deleted by
    /// [`cleanup_launch_templates`](Self::cleanup_launch_templates) a minute later, as
    /// upstream. Returns how many were found.
    pub async fn hydrate_launch_templates(&self) -> Result<usize, CloudProviderError> {
        let listed = self.cluster_launch_templates().await?;
        let now = Instant::now();
        let mut cache = lock(&self.launch_templates);
        for t in &listed {
            cache.entry(t.name.clone()).or_insert(now);
        }
        Ok(listed.len())
    }

    /// Deletes the launch templates no launch used for
    /// [`ProviderOptions::launch_template_ttl`] (upstream
    /// deletes a template when its cache entry expires) and returns their names. Run it about
    /// once a minute.
    pub async fn cleanup_launch_templates(&self) -> Result<Vec<String>, CloudProviderError> {
        let expired: Vec<String> = {
            let mut cache = lock(&self.launch_templates);
            let names: Vec<String> = cache
                .iter()
                .filter(|(_, seen)| seen.elapsed() >= self.options.launch_template_ttl)
                .map(|(n, _)| n.clone())
                .collect();
            for n in &names {
                cache.remove(n);
            }
            names
        };
        for name in &expired {
            self.delete_launch_template(name).await?;
        }
        Ok(expired)
    }

    /// Deletes every launch template of EC2NodeClass `class_name` in this cluster (the class's
    /// finalizer step, as upstream) and returns their names.
    pub async fn delete_class_launch_templates(
        &self,
        class_name: &str,
    ) -> Result<Vec<String>, CloudProviderError> {
        let names: Vec<String> = self
            .cluster_launch_templates()
            .await?
            .into_iter()
            .filter(|t| t.tags.get(launch::NODECLASS_TAG).map(String::as_str) == Some(class_name))
            .map(|t| t.name)
            .collect();
        for name in &names {
            lock(&self.launch_templates).remove(name);
            self.delete_launch_template(name).await?;
        }
        Ok(names)
    }

    /// Refreshes on-demand prices from the Price List API (both queries, as upstream); the
    /// instance types built afterwards carry them. A failure keeps the current prices (the
    /// embedded snapshot before the first success) and is returned. Returns how many types got
    /// a price.
    pub async fn refresh_on_demand_prices(
        &self,
        api: &dyn PricingApi,
    ) -> Result<usize, PricingError> {
        let prices = crate::pricing::fetch_on_demand(api, &self.clients.region).await?;
        let n = prices.len();
        self.update_prices(|p| p.update_on_demand(Ok(prices)));
        Ok(n)
    }

    /// Refreshes spot prices from DescribeSpotPriceHistory; the instance types built
    /// afterwards carry them. A failure keeps the current prices and is returned. Returns how
    /// many (type, zone) pairs got a price.
    pub async fn refresh_spot_prices(&self) -> Result<usize, PricingError> {
        let prices = self.describe_spot_prices().await?;
        let n = prices.len();
        self.update_prices(|p| p.update_spot(Ok(prices)));
        Ok(n)
    }
}
