//! The launch path: launch templates and the batched CreateFleet.

use super::*;
use crate::launch::template::{self, TemplateData, TemplateParams};

impl AwsCloudProvider {
    /// Ensures the launch template for `class`, `claim` and `params` (the user data is
    /// generated here) exists and returns its name.
    pub(super) async fn ensure_launch_template(
        &self,
        class: &EC2NodeClass,
        claim: &NodeClaim,
        mut params: TemplateParams,
    ) -> Result<String, CloudProviderError> {
        let family = class.spec.resolved_ami_family().unwrap_or_default();
        let mut taints: Vec<BootstrapTaint> = claim
            .spec
            .taints
            .iter()
            .chain(&claim.spec.startup_taints)
            .map(|t| BootstrapTaint {
                key: t.key.clone(),
                value: t.value.clone(),
                effect: t.effect.to_string(),
            })
            .collect();
        taints.sort_by(|a, b| a.key.cmp(&b.key).then_with(|| a.effect.cmp(&b.effect)));
        let boot = BootstrapOptions {
            cluster_name: self.options.cluster_name.clone(),
            api_server_endpoint: self.options.cluster_endpoint.clone(),
            ca_bundle: self.options.cluster_ca_bundle.clone(),
            cluster_cidr: self.options.cluster_cidr.clone(),
            ipv6: self.ipv6(),
            labels: claim.metadata.labels.clone(),
            taints,
            kubelet: class.spec.kubelet.clone(),
            max_pods: class.spec.kubelet.as_ref().and_then(|k| k.max_pods),
            instance_store_raid0: class.spec.instance_store_policy.as_deref() == Some("RAID0"),
            custom_user_data: class.spec.user_data.clone(),
        };
        let user_data = userdata::user_data(family, &boot)
            .map_err(|e| CloudProviderError::create("UserDataInvalid", e.to_string()))?;
        params.user_data = Some(userdata::base64(user_data.as_bytes()));
        params.ipv6 = self.ipv6();
        let content = template::template_data(class, &params);
        let name = launch::launch_template_name(&content);
        {
            let mut cache = lock(&self.launch_templates);
            if let Some(seen) = cache.get_mut(&name)
                && seen.elapsed() < self.options.launch_template_ttl
            {
                *seen = Instant::now();
                return Ok(name);
            }
        }
        // One launch at a time looks a template up or creates it; the others wait and then find
        // it in the cache.
        let _single = self.launch_template_lock.lock().await;
        if lock(&self.launch_templates)
            .get(&name)
            .is_some_and(|seen| seen.elapsed() < self.options.launch_template_ttl)
        {
            return Ok(name);
        }
        self.counters
            .describe_launch_templates
            .fetch_add(1, Ordering::Relaxed);
        let found = self
            .clients
            .ec2
            .describe_launch_templates()
            .launch_template_names(&name)
            .max_results(1)
            .send()
            .await;
        let exists = match found {
            Ok(out) => !out.launch_templates().is_empty(),
            Err(e) => {
                let (code, message) = error_code(&e);
                if code != "InvalidLaunchTemplateName.NotFoundException" {
                    return Err(other("DescribeLaunchTemplates", &code, &message));
                }
                false
            }
        };
        if !exists {
            let data = to_sdk(&content);
            self.counters
                .create_launch_template
                .fetch_add(1, Ordering::Relaxed);
            let created = self
                .clients
                .ec2
                .create_launch_template()
                .launch_template_name(&name)
                .launch_template_data(data)
                .tag_specifications(
                    ec2::TagSpecification::builder()
                        .resource_type(ec2::ResourceType::LaunchTemplate)
                        .set_tags(Some(convert::to_tags(&content.tags)))
                        .build(),
                )
                .send()
                .await;
            if let Err(e) = created {
                let (code, message) = error_code(&e);
                // Another launch created it meanwhile.
                if code != "InvalidLaunchTemplateName.AlreadyExistsException" {
                    return Err(CloudProviderError::create(
                        launch::error_reason(&code, &message),
                        format!("creating launch template: {code}: {message}"),
                    ));
                }
            }
        }
        lock(&self.launch_templates).insert(name.clone(), Instant::now());
        Ok(name)
    }

    /// Sends `request` through the CreateFleet batcher: identical requests within the window
    /// become one call with `TotalTargetCapacity = N`; each caller gets one instance (or the
    /// fleet's errors).
    pub(super) async fn create_fleet(&self, request: FleetRequest) -> FleetShare {
        let key = serde_json::to_string(&request).unwrap_or_default();
        let (tx, rx) = oneshot::channel();
        let leader = {
            let mut batches = lock(&self.fleet_batches);
            match batches.get_mut(&key) {
                Some(b) => {
                    b.waiters.push(tx);
                    b.last_join = Instant::now();
                    false
                }
                None => {
                    batches.insert(
                        key.clone(),
                        FleetBucket {
                            request,
                            waiters: vec![tx],
                            last_join: Instant::now(),
                        },
                    );
                    true
                }
            }
        };
        if leader {
            let batches = Arc::clone(&self.fleet_batches);
            let ec2c = self.clients.ec2.clone();
            let counters = Arc::clone(&self.counters);
            let idle_for = self.options.fleet_batch_idle;
            // The window and the call run in their own task, so a caller that gives up does not
            // strand the others.
            tokio::spawn(async move {
                let opened = Instant::now();
                loop {
                    tokio::time::sleep(idle_for).await;
                    let idle = lock(&batches)
                        .get(&key)
                        .is_none_or(|b| b.last_join.elapsed() >= idle_for);
                    if idle || opened.elapsed() >= FLEET_BATCH_MAX {
                        break;
                    }
                }
                let Some(bucket) = lock(&batches).remove(&key) else {
                    return;
                };
                counters.create_fleet.fetch_add(1, Ordering::Relaxed);
                let n = bucket.waiters.len();
                let result = send_fleet(&ec2c, &bucket.request, n).await;
                match result {
                    Ok((instances, errors)) => {
                        let mut instances = instances.into_iter();
                        for w in bucket.waiters {
                            let mine: Vec<FleetInstance> = instances.next().into_iter().collect();
                            let mut errs = errors.clone();
                            if mine.is_empty() && errs.is_empty() {
                                errs.push(FleetError {
                                    code: "UnfulfillableCapacity".into(),
                                    message: "too few instances returned".into(),
                                    instance_type: None,
                                    zone: None,
                                    subnet_id: None,
                                });
                            }
                            let _ = w.send(Ok((mine, errs)));
                        }
                    }
                    Err(e) => {
                        for w in bucket.waiters {
                            let _ = w.send(Err(e.clone()));
                        }
                    }
                }
            });
        }
        rx.await.unwrap_or_else(|_| {
            Err((
                String::new(),
                "the CreateFleet batch was dropped".to_string(),
            ))
        })
    }
}

/// The launch-template data of `class` for `image_id` with no EFA interfaces, placement or
/// reservation (the dry-run permission check of `ValidationSucceeded`).
pub(crate) fn launch_template_data(
    class: &EC2NodeClass,
    image_id: &str,
    user_data: Option<&str>,
    tags: &BTreeMap<String, String>,
) -> ec2::RequestLaunchTemplateData {
    to_sdk(&template::template_data(
        class,
        &TemplateParams {
            image_id: image_id.to_string(),
            user_data: user_data.map(str::to_string),
            tags: tags.clone(),
            ..TemplateParams::default()
        },
    ))
}

/// [`TemplateData`] as the SDK's `RequestLaunchTemplateData`, field for field.
pub(crate) fn to_sdk(d: &TemplateData) -> ec2::RequestLaunchTemplateData {
    let m = &d.metadata_options;
    let mut data = ec2::RequestLaunchTemplateData::builder()
        .image_id(&d.image_id)
        .set_user_data(d.user_data.clone())
        .metadata_options(
            ec2::LaunchTemplateInstanceMetadataOptionsRequest::builder()
                .http_endpoint(ec2::LaunchTemplateInstanceMetadataEndpointState::from(
                    m.http_endpoint.as_str(),
                ))
                .http_protocol_ipv6(ec2::LaunchTemplateInstanceMetadataProtocolIpv6::from(
                    m.http_protocol_ipv6.as_str(),
                ))
                .http_put_response_hop_limit(
                    i32::try_from(m.http_put_response_hop_limit).unwrap_or(1),
                )
                .http_tokens(ec2::LaunchTemplateHttpTokensState::from(
                    m.http_tokens.as_str(),
                ))
                .instance_metadata_tags(ec2::LaunchTemplateInstanceMetadataTagsState::from(
                    m.instance_metadata_tags.as_str(),
                ))
                .build(),
        )
        .monitoring(
            ec2::LaunchTemplatesMonitoringRequest::builder()
                .enabled(d.monitoring)
                .build(),
        )
        .tag_specifications(
            ec2::LaunchTemplateTagSpecificationRequest::builder()
                .resource_type(ec2::ResourceType::NetworkInterface)
                .set_tags(Some(convert::to_tags(&d.tags)))
                .build(),
        );
    for n in &d.network_interfaces {
        let conntrack = n.connection_tracking.as_ref().map(|c| {
            let secs = |v: Option<i64>| v.and_then(|v| i32::try_from(v).ok());
            ec2::ConnectionTrackingSpecificationRequest::builder()
                .set_tcp_established_timeout(secs(c.tcp_established_timeout))
                .set_udp_stream_timeout(secs(c.udp_stream_timeout))
                .set_udp_timeout(secs(c.udp_timeout))
                .build()
        });
        data = data.network_interfaces(
            ec2::LaunchTemplateInstanceNetworkInterfaceSpecificationRequest::builder()
                .set_network_card_index(n.network_card_index)
                .device_index(n.device_index)
                .set_interface_type(n.interface_type.clone())
                .set_groups(Some(n.groups.clone()))
                .set_associate_public_ip_address(n.associate_public_ip_address)
                .set_ipv4_prefix_count(n.ipv4_prefix_count)
                .set_ipv6_prefix_count(n.ipv6_prefix_count)
                .set_primary_ipv6(n.primary_ipv6)
                .set_ipv6_address_count(n.ipv6_address_count)
                .set_connection_tracking_specification(conntrack)
                .build(),
        );
    }
    if let Some(p) = &d.instance_profile {
        data = data.iam_instance_profile(
            ec2::LaunchTemplateIamInstanceProfileSpecificationRequest::builder()
                .name(p)
                .build(),
        );
    }
    if let Some(v) = &d.nested_virtualization {
        data = data.cpu_options(
            ec2::LaunchTemplateCpuOptionsRequest::builder()
                .nested_virtualization(ec2::NestedVirtualizationSpecification::from(v.as_str()))
                .build(),
        );
    }
    if let Some(p) = &d.placement {
        data = data.placement(
            ec2::LaunchTemplatePlacementRequest::builder()
                .group_id(&p.group_id)
                .set_partition_number(p.partition_number)
                .build(),
        );
    }
    // Launches outside a reservation opt out of open reservations (upstream with its
    // ReservedCapacity gate on); reserved launches target theirs only.
    let reservation = match &d.reservation {
        Some(r) => ec2::LaunchTemplateCapacityReservationSpecificationRequest::builder()
            .capacity_reservation_preference(
                ec2::CapacityReservationPreference::CapacityReservationsOnly,
            )
            .capacity_reservation_target(
                ec2::CapacityReservationTarget::builder()
                    .capacity_reservation_id(&r.id)
                    .build(),
            )
            .build(),
        None => ec2::LaunchTemplateCapacityReservationSpecificationRequest::builder()
            .capacity_reservation_preference(ec2::CapacityReservationPreference::None)
            .build(),
    };
    data = data.capacity_reservation_specification(reservation);
    if let Some(market) = d
        .reservation
        .as_ref()
        .and_then(|r| r.market_type.as_deref())
    {
        data = data.instance_market_options(
            ec2::LaunchTemplateInstanceMarketOptionsRequest::builder()
                .market_type(ec2::MarketType::from(market))
                .build(),
        );
    }
    for m in &d.block_device_mappings {
        let mut b = ec2::LaunchTemplateBlockDeviceMappingRequest::builder()
            .set_device_name(m.device_name.clone());
        if let Some(e) = &m.ebs {
            let size = e.volume_size.as_deref().and_then(launch::volume_size_gib);
            b = b.ebs(
                ec2::LaunchTemplateEbsBlockDeviceRequest::builder()
                    .set_delete_on_termination(e.delete_on_termination)
                    .set_encrypted(e.encrypted)
                    .set_iops(e.iops.and_then(|v| i32::try_from(v).ok()))
                    .set_kms_key_id(e.kms_key_id.clone())
                    .set_snapshot_id(e.snapshot_id.clone())
                    .set_throughput(e.throughput.and_then(|v| i32::try_from(v).ok()))
                    .set_volume_initialization_rate(
                        e.volume_initialization_rate
                            .and_then(|v| i32::try_from(v).ok()),
                    )
                    .set_volume_size(size)
                    .set_volume_type(e.volume_type.as_deref().map(ec2::VolumeType::from))
                    .build(),
            );
        }
        data = data.block_device_mappings(b.build());
    }
    data.build()
}

/// One CreateFleet call for `n` instances; its instances and errors as plain data, or the API
/// error's (code, message).
async fn send_fleet(
    ec2c: &aws_sdk_ec2::Client,
    r: &FleetRequest,
    n: usize,
) -> Result<(Vec<FleetInstance>, Vec<FleetError>), (String, String)> {
    let mut req = ec2c
        .create_fleet()
        .r#type(ec2::FleetType::from(r.r#type.as_str()))
        .target_capacity_specification(
            ec2::TargetCapacitySpecificationRequest::builder()
                .total_target_capacity(i32::try_from(n).unwrap_or(i32::MAX))
                .default_target_capacity_type(ec2::DefaultTargetCapacityType::from(
                    r.default_target_capacity_type.as_str(),
                ))
                .build(),
        )
        .set_context(r.context.clone());
    if let Some(s) = &r.spot_allocation_strategy {
        req = req.spot_options(
            ec2::SpotOptionsRequest::builder()
                .allocation_strategy(ec2::SpotAllocationStrategy::from(s.as_str()))
                .build(),
        );
    }
    if let Some(s) = &r.on_demand_allocation_strategy {
        req = req.on_demand_options(
            ec2::OnDemandOptionsRequest::builder()
                .allocation_strategy(ec2::FleetOnDemandAllocationStrategy::from(s.as_str()))
                .build(),
        );
    }
    for (resource, tags) in &r.tag_specifications {
        req = req.tag_specifications(
            ec2::TagSpecification::builder()
                .resource_type(ec2::ResourceType::from(resource.as_str()))
                .set_tags(Some(convert::to_tags(tags)))
                .build(),
        );
    }
    for c in &r.launch_template_configs {
        let overrides = c
            .overrides
            .iter()
            .map(|o| {
                ec2::FleetLaunchTemplateOverridesRequest::builder()
                    .instance_type(ec2::InstanceType::from(o.instance_type.as_str()))
                    .subnet_id(&o.subnet_id)
                    .image_id(&o.image_id)
                    .availability_zone(&o.availability_zone)
                    .priority(o.priority)
                    .build()
            })
            .collect();
        req = req.launch_template_configs(
            ec2::FleetLaunchTemplateConfigRequest::builder()
                .launch_template_specification(
                    ec2::FleetLaunchTemplateSpecificationRequest::builder()
                        .launch_template_name(&c.launch_template_name)
                        .version(&c.version)
                        .build(),
                )
                .set_overrides(Some(overrides))
                .build(),
        );
    }
    let out = req.send().await.map_err(|e| error_code(&e))?;
    let mut instances = Vec::new();
    for i in out.instances() {
        let o = i
            .launch_template_and_overrides()
            .and_then(|l| l.overrides());
        for id in i.instance_ids() {
            instances.push(FleetInstance {
                instance_id: id.clone(),
                instance_type: i
                    .instance_type()
                    .or_else(|| o.and_then(|o| o.instance_type()))
                    .map(|t| t.as_str().to_string())
                    .unwrap_or_default(),
                zone: o
                    .and_then(|o| o.availability_zone())
                    .unwrap_or_default()
                    .to_string(),
                subnet_id: o
                    .and_then(|o| o.subnet_id())
                    .unwrap_or_default()
                    .to_string(),
                image_id: o.and_then(|o| o.image_id()).unwrap_or_default().to_string(),
            });
        }
    }
    let errors = out
        .errors()
        .iter()
        .map(|e| {
            let o = e
                .launch_template_and_overrides()
                .and_then(|l| l.overrides());
            FleetError {
                code: e.error_code().unwrap_or_default().to_string(),
                message: e.error_message().unwrap_or_default().to_string(),
                instance_type: o
                    .and_then(|o| o.instance_type())
                    .map(|t| t.as_str().to_string()),
                zone: o.and_then(|o| o.availability_zone()).map(str::to_string),
                subnet_id: o.and_then(|o| o.subnet_id()).map(str::to_string),
            }
        })
        .collect();
    Ok((instances, errors))
}
