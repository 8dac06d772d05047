//! Instance types: the EC2 data, prices, the per-class conversion and availability.

use super::*;

/// Zone name → zone id of the class's subnets (`status.subnets[].zoneID`).
pub(super) fn zone_ids(class: &EC2NodeClass) -> BTreeMap<String, String> {
    class
        .status
        .subnets
        .iter()
        .filter_map(|s| s.zone_id.clone().map(|id| (s.zone.clone(), id)))
        .collect()
}

impl AwsCloudProvider {
    /// Describes instance types, offerings and spot prices now (also done lazily on first use
    /// and every [`EC2_REFRESH_INTERVAL`]).
    pub async fn refresh_ec2(&self) -> Result<(), CloudProviderError> {
        let mut guard = self.ec2_data.lock().await;
        let data = self.describe_ec2().await?;
        *guard = Some(Arc::new(data));
        lock(&self.types).clear();
        Ok(())
    }

    pub(super) async fn ec2(&self) -> Result<Arc<Ec2Data>, CloudProviderError> {
        let mut guard = self.ec2_data.lock().await;
        if let Some(d) = guard.as_ref()
            && d.fetched.elapsed() < EC2_REFRESH_INTERVAL
        {
            return Ok(Arc::clone(d));
        }
        let data = Arc::new(self.describe_ec2().await?);
        *guard = Some(Arc::clone(&data));
        lock(&self.types).clear();
        Ok(data)
    }

    pub(super) async fn describe_ec2(&self) -> Result<Ec2Data, CloudProviderError> {
        let ec2c = &self.clients.ec2;
        let mut instance_types = BTreeMap::new();
        let mut token = None;
        loop {
            self.counters
                .describe_instance_types
                .fetch_add(1, Ordering::Relaxed);
            let out = ec2c
                .describe_instance_types()
                .filters(
                    ec2::Filter::builder()
                        .name("supported-virtualization-type")
                        .values("hvm")
                        .build(),
                )
                .filters(
                    ec2::Filter::builder()
                        .name("processor-info.supported-architecture")
                        .values("x86_64")
                        .values("arm64")
                        .build(),
                )
                .max_results(100)
                .set_next_token(token)
                .send()
                .await
                .map_err(api_error("DescribeInstanceTypes"))?;
            for i in out.instance_types() {
                if let Some(t) = i.instance_type() {
                    instance_types.insert(t.as_str().to_string(), convert::instance_type_info(i));
                }
            }
            token = out.next_token().map(str::to_string);
            if token.is_none() {
                break;
            }
        }
        let mut offerings: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        let mut token = None;
        loop {
            let out = ec2c
                .describe_instance_type_offerings()
                .location_type(ec2::LocationType::AvailabilityZone)
                .max_results(1000)
                .set_next_token(token)
                .send()
                .await
                .map_err(api_error("DescribeInstanceTypeOfferings"))?;
            for o in out.instance_type_offerings() {
                if let (Some(t), Some(z)) = (o.instance_type(), o.location()) {
                    offerings
                        .entry(t.as_str().to_string())
                        .or_default()
                        .insert(z.to_string());
                }
            }
            token = out.next_token().map(str::to_string);
            if token.is_none() {
                break;
            }
        }
        // Spot prices: a failure keeps the previous ones (on-demand fallback before the first
        // success), as upstream.
        let spot = self.describe_spot_prices().await;
        {
            let mut prices = lock(&self.prices);
            prices.update_spot(spot);
        }
        Ok(Ec2Data {
            sources: CatalogSources {
                region: self.clients.region.clone(),
                instance_types,
                offerings,
                on_demand_prices: BTreeMap::new(),
            },
            fetched: Instant::now(),
        })
    }

    pub(super) async fn describe_spot_prices(
        &self,
    ) -> Result<BTreeMap<(String, String), f64>, crate::pricing::PricingError> {
        let mut records = Vec::new();
        let mut token = None;
        loop {
            let out = self
                .clients
                .ec2
                .describe_spot_price_history()
                .product_descriptions("Linux/UNIX")
                .product_descriptions("Linux/UNIX (Amazon VPC)")
                .start_time(aws_smithy_types::DateTime::from(
                    std::time::SystemTime::now(),
                ))
                .max_results(1000)
                .set_next_token(token)
                .send()
                .await
                .map_err(|e| {
                    let (c, m) = error_code(&e);
                    crate::pricing::PricingError::Api(format!("DescribeSpotPriceHistory: {c} {m}"))
                })?;
            for r in out.spot_price_history() {
                records.push(SpotPriceRecord {
                    instance_type: r
                        .instance_type()
                        .map(|t| t.as_str().to_string())
                        .unwrap_or_default(),
                    availability_zone: r.availability_zone().unwrap_or_default().to_string(),
                    spot_price: r.spot_price().unwrap_or_default().to_string(),
                    timestamp: r
                        .timestamp()
                        .and_then(|t| t.fmt(aws_smithy_types::date_time::Format::DateTime).ok()),
                });
            }
            token = out
                .next_token()
                .filter(|t| !t.is_empty())
                .map(str::to_string);
            if token.is_none() {
                break;
            }
        }
        crate::pricing::spot_prices(&records)
    }

    /// The instance types of `class`: the catalog conversion of the EC2 data with the class's
    /// options, offerings in the zones of its subnets, current prices and availability.
    pub async fn instance_types_for_class(
        &self,
        class: &EC2NodeClass,
    ) -> Result<Vec<Arc<InstanceType>>, CloudProviderError> {
        let data = self.ec2().await?;
        let name = class.name().to_string();
        let zones: BTreeSet<String> = class
            .status
            .subnets
            .iter()
            .map(|s| s.zone.clone())
            .collect();
        let base = AwsCatalogOptions {
            region: self.clients.region.clone(),
            vm_memory_overhead_percent: self.options.vm_memory_overhead_percent,
            reserved_enis: self.options.reserved_enis,
            spot_price_factor: UPSTREAM_FALLBACK_SPOT_PRICE_FACTOR,
            ..AwsCatalogOptions::default()
        };
        let mut opts = class.catalog_options(&base).map_err(|e| {
            CloudProviderError::node_class_not_ready(format!("EC2NodeClass {name}: {e}"))
        })?;
        let placement_group = self.placement_group(class).await?;
        opts.placement_group_strategy = placement_group.as_ref().map(|g| g.strategy.clone());
        let zone_ids = zone_ids(class);
        let key = format!(
            "{zone_ids:?}|{zones:?}|{:?}|{opts:?}|{placement_group:?}",
            class.status.amis.iter().map(|a| &a.id).collect::<Vec<_>>()
        );
        let cached = {
            let types = lock(&self.types);
            types
                .get(&name)
                .filter(|e| e.key == key && e.built.elapsed() < INSTANCE_TYPES_TTL)
                .map(|e| e.types.clone())
        };
        let types = match cached {
            Some(t) => t,
            None => {
                let mut built = self.build_types(&data, &zones, &zone_ids, &opts)?;
                if let Some(g) = &placement_group {
                    for it in &mut built {
                        let t = Arc::make_mut(it);
                        for r in g.requirements() {
                            t.add_requirement(r);
                        }
                    }
                }
                lock(&self.types).insert(
                    name,
                    TypesEntry {
                        key,
                        types: built.clone(),
                        built: Instant::now(),
                    },
                );
                built
            }
        };
        Ok(self.apply_unavailable(self.apply_reservations(types, class)))
    }

    pub(super) fn build_types(
        &self,
        data: &Ec2Data,
        zones: &BTreeSet<String>,
        zone_ids: &BTreeMap<String, String>,
        opts: &AwsCatalogOptions,
    ) -> Result<Vec<Arc<InstanceType>>, CloudProviderError> {
        let prices = lock(&self.prices).clone();
        let mut sources = CatalogSources {
            region: data.sources.region.clone(),
            instance_types: data.sources.instance_types.clone(),
            offerings: data
                .sources
                .offerings
                .iter()
                .map(|(t, z)| (t.clone(), z.intersection(zones).cloned().collect()))
                .collect(),
            on_demand_prices: BTreeMap::new(),
        };
        sources.on_demand_prices = sources
            .instance_types
            .keys()
            .filter_map(|t| prices.on_demand_price(t).map(|p| (t.clone(), p)))
            .collect();
        let report = build_catalog(&sources, opts)
            .map_err(|e| CloudProviderError::other(format!("converting instance types: {e}")))?;
        let mut out = Vec::with_capacity(report.instance_types.len());
        for mut it in report.instance_types {
            for o in &mut it.offerings {
                if o.capacity_type == "spot" {
                    match prices.spot_price(&it.name, &o.zone) {
                        Some(p) => o.price = p,
                        None => o.available = false,
                    }
                }
            }
            let mut converted = it.to_instance_type().map_err(|e| {
                CloudProviderError::other(format!("instance type {}: {e}", it.name))
            })?;
            // Spot and on-demand offerings never carry the reservation labels (upstream).
            converted.offerings = std::mem::take(&mut converted.offerings)
                .into_iter()
                .map(crate::reservation::without_reservation)
                .collect();
            // `topology.k8s.aws/zone-id`: the ids of the zones the type is offered in, from
            // the class's subnets (upstream takes them from there too; the catalog has no
            // subnets, so the provider adds the requirement).
            let ids: BTreeSet<&str> = converted
                .offerings
                .iter()
                .filter_map(|o| zone_ids.get(o.zone()).map(String::as_str))
                .collect();
            if !ids.is_empty() {
                converted.add_requirement(karpenter_core::requirements::Requirement::new(
                    crate::catalog::labels::TOPOLOGY_ZONE_ID,
                    karpenter_core::requirements::Operator::In,
                    ids,
                ));
            }
            out.push(Arc::new(converted));
        }
        Ok(out)
    }

    pub(super) fn apply_unavailable(
        &self,
        mut types: Vec<Arc<InstanceType>>,
    ) -> Vec<Arc<InstanceType>> {
        let now = jiff::Timestamp::now();
        let mut cache = lock(&self.unavailable);
        cache.expire(now);
        if cache.is_empty() {
            return types;
        }
        for it in &mut types {
            let hit: Vec<usize> = it
                .offerings
                .iter()
                .enumerate()
                .filter(|(_, o)| {
                    o.available
                        && cache.is_unavailable(o.capacity_type(), it.name(), o.zone(), &[], now)
                })
                .map(|(i, _)| i)
                .collect();
            if hit.is_empty() {
                continue;
            }
            let t = Arc::make_mut(it);
            for i in hit {
                if let Some(o) = t.offerings.get_mut(i) {
                    o.available = false;
                }
            }
        }
        types
    }
}
