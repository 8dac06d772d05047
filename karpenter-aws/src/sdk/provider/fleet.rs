//! The launch path: launch templates and the batched CreateFleet.

use super::*;

impl AwsCloudProvider {
    /// Ensures the launch template for `class`, `claim` and `image_id` exists and returns its
    /// name.
    pub(super) async fn ensure_launch_template(
        &self,
        class: &EC2NodeClass,
        claim: &NodeClaim,
        image_id: &str,
        tags: &BTreeMap<String, String>,
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
            // An IPv6 service CIDR is an IPv6 cluster (upstream's IP family).
            ipv6: self
                .options
                .cluster_cidr
                .as_deref()
                .is_some_and(|c| c.contains(':')),
            labels: claim.metadata.labels.clone(),
            taints,
            kubelet: class.spec.kubelet.clone(),
            max_pods: class.spec.kubelet.as_ref().and_then(|k| k.max_pods),
            instance_store_raid0: class.spec.instance_store_policy.as_deref() == Some("RAID0"),
            custom_user_data: class.spec.user_data.clone(),
        };
        let user_data = userdata::user_data(family, &boot)
            .map_err(|e| CloudProviderError::create("UserDataInvalid", e.to_string()))?;
        let user_data = userdata::base64(user_data.as_bytes());
        let TemplateInputs {
            metadata,
            security_groups,
            profile,
        } = TemplateInputs::of(class);
        let content = serde_json::json!({
            "imageId": image_id,
            "userData": user_data,
            "securityGroups": security_groups,
            "instanceProfile": profile,
            "metadata": [metadata.http_endpoint, metadata.http_protocol_ipv6,
                metadata.http_put_response_hop_limit, metadata.http_tokens],
            "blockDeviceMappings": serde_json::to_value(launch::block_device_mappings(class)).unwrap_or_default(),
            "associatePublicIpAddress": class.spec.associate_public_ip_address,
            "detailedMonitoring": class.spec.detailed_monitoring,
            "tags": tags,
        });
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
            let data = launch_template_data(class, image_id, Some(&user_data), tags);
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
                        .set_tags(Some(convert::to_tags(tags)))
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

/// What a launch template takes from its class besides the image and the user data: the
/// resolved metadata options, the status security groups' ids and the status instance profile.
/// The template's name (a hash of its content) and its data read the same values.
pub(crate) struct TemplateInputs {
    /// `spec.metadataOptions` with upstream's defaults.
    pub(crate) metadata: crate::nodeclass::ResolvedMetadataOptions,
    /// The ids of `status.securityGroups`, in status order.
    pub(crate) security_groups: Vec<String>,
    /// `status.instanceProfile`.
    pub(crate) profile: Option<String>,
}

impl TemplateInputs {
    /// The inputs of `class`.
    pub(crate) fn of(class: &EC2NodeClass) -> TemplateInputs {
        TemplateInputs {
            metadata: class.spec.resolved_metadata_options(),
            security_groups: class
                .status
                .security_groups
                .iter()
                .map(|g| g.id.clone())
                .collect(),
            profile: class.status.instance_profile.clone(),
        }
    }
}

/// The launch-template data of `class` for `image_id`: user data (base64), metadata options,
/// monitoring, one network interface with the status security groups, the status instance
/// profile, block devices ([`launch::block_device_mappings`]: the class's, else its AMI
/// family's defaults), tags on the network interface. Launches and the dry-run permission
/// check of `ValidationSucceeded` build it the same way.
pub(crate) fn launch_template_data(
    class: &EC2NodeClass,
    image_id: &str,
    user_data: Option<&str>,
    tags: &BTreeMap<String, String>,
) -> ec2::RequestLaunchTemplateData {
    let TemplateInputs {
        metadata,
        security_groups,
        profile,
    } = TemplateInputs::of(class);
    let mut data = ec2::RequestLaunchTemplateData::builder()
        .image_id(image_id)
        .set_user_data(user_data.map(str::to_string))
        .metadata_options(
            ec2::LaunchTemplateInstanceMetadataOptionsRequest::builder()
                .http_endpoint(ec2::LaunchTemplateInstanceMetadataEndpointState::from(
                    metadata.http_endpoint.as_str(),
                ))
                .http_protocol_ipv6(ec2::LaunchTemplateInstanceMetadataProtocolIpv6::from(
                    metadata.http_protocol_ipv6.as_str(),
                ))
                .http_put_response_hop_limit(
                    i32::try_from(metadata.http_put_response_hop_limit).unwrap_or(1),
                )
                .http_tokens(ec2::LaunchTemplateHttpTokensState::from(
                    metadata.http_tokens.as_str(),
                ))
                .instance_metadata_tags(ec2::LaunchTemplateInstanceMetadataTagsState::Disabled)
                .build(),
        )
        .monitoring(
            ec2::LaunchTemplatesMonitoringRequest::builder()
                .enabled(class.spec.detailed_monitoring.unwrap_or(false))
                .build(),
        )
        .network_interfaces(
            ec2::LaunchTemplateInstanceNetworkInterfaceSpecificationRequest::builder()
                .device_index(0)
                .set_associate_public_ip_address(class.spec.associate_public_ip_address)
                .set_groups(Some(security_groups.clone()))
                .build(),
        )
        .tag_specifications(
            ec2::LaunchTemplateTagSpecificationRequest::builder()
                .resource_type(ec2::ResourceType::NetworkInterface)
                .set_tags(Some(convert::to_tags(tags)))
                .build(),
        );
    if let Some(p) = &profile {
        data = data.iam_instance_profile(
            ec2::LaunchTemplateIamInstanceProfileSpecificationRequest::builder()
                .name(p)
                .build(),
        );
    }
    for m in launch::block_device_mappings(class) {
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
