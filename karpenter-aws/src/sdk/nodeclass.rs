//! EC2NodeClass status through the AWS APIs: DescribeSubnets and DescribeSecurityGroups for the
//! selector terms, SSM GetParameter for alias terms and DescribeImages for every AMI term, the
//! instance profile created from `spec.role` through IAM (and deleted with the class), the
//! dry-run permission checks of `ValidationSucceeded` (CreateFleet, CreateLaunchTemplate,
//! RunInstances with `DryRun=true`, as upstream, cached 30 minutes), all fed into
//! [`crate::nodeclass::reconcile::reconcile`].

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use aws_sdk_ec2::types as ec2;
use aws_smithy_types::error::metadata::ProvideErrorMetadata;

use super::{AwsClients, convert, display_chain, error_code};
use crate::ami::{self, Image};
use crate::instanceprofile::{self, AuthCheck, DryRunOutcome, ProfileAction, ProfileInfo};
use crate::nodeclass::EC2NodeClass;
use crate::nodeclass::reconcile::{
    AmiObservation, DEPENDENTS, Observations, Reconciled, VALIDATION_SUCCEEDED,
    ValidationObservation, reconcile,
};
use crate::resolve::{self, Filter, SecurityGroupInfo, SubnetInfo};

/// Why a class could not be resolved (an API failure; resolution results, even empty ones, are
/// observations).
#[derive(Debug, thiserror::Error)]
#[error("{call}: {message}")]
pub struct ResolveError {
    /// The API call that failed.
    pub call: &'static str,
    /// Its error code and message.
    pub message: String,
}

/// Describes the objects of each filter set with `describe` (one call per set, as upstream
/// queries each selector term on its own) and merges the answers by `id`: each object once, in
/// id order.
async fn describe_by_filter_sets<T, F, Fut>(
    sets: Vec<Vec<Filter>>,
    describe: F,
    id: impl Fn(&T) -> String,
) -> Result<Vec<T>, ResolveError>
where
    F: Fn(Vec<ec2::Filter>) -> Fut,
    Fut: std::future::Future<Output = Result<Vec<T>, ResolveError>>,
{
    let mut out: BTreeMap<String, T> = BTreeMap::new();
    for set in sets {
        for object in describe(set.iter().map(convert::filter).collect()).await? {
            out.insert(id(&object), object);
        }
    }
    Ok(out.into_values().collect())
}

fn fail<E>(call: &'static str) -> impl FnOnce(aws_sdk_ec2::error::SdkError<E>) -> ResolveError
where
    E: ProvideErrorMetadata + std::error::Error + 'static,
{
    move |e| {
        let (code, message) = error_code(&e);
        ResolveError {
            call,
            message: format!("{code} {message}").trim().to_string(),
        }
    }
}

/// How long the result of the dry-run permission checks is reused for an unchanged class
/// (upstream: 30 minutes).
pub const VALIDATION_TTL: Duration = Duration::from_secs(30 * 60);

/// How long an instance profile the resolver just created (and the one it replaced) is kept
/// from garbage collection (upstream: 1 hour).
pub const PROFILE_PROTECTION: Duration = Duration::from_secs(3600);

/// How often managed instance profiles are garbage-collected (upstream: 30 minutes).
pub const PROFILE_GC_INTERVAL: Duration = Duration::from_secs(30 * 60);

/// Validation results by class name and the inputs they were computed from.
type ValidationCache = Arc<Mutex<BTreeMap<String, (Instant, ValidationObservation)>>>;

/// Resolves EC2NodeClasses for one cluster.
#[derive(Debug, Clone)]
pub struct NodeClassResolver {
    clients: AwsClients,
    cluster_name: String,
    kubernetes_version: String,
    dry_run: bool,
    validations: ValidationCache,
    protected: Arc<Mutex<BTreeMap<String, Instant>>>,
    protection: Duration,
    reservations: super::reservation::SharedAvailability,
}

impl NodeClassResolver {
    /// A resolver for `cluster_name`, whose Kubernetes version (`major.minor`) picks the SSM
    /// parameters of alias terms.
    pub fn new(
        clients: AwsClients,
        cluster_name: impl Into<String>,
        kubernetes_version: impl Into<String>,
    ) -> Self {
        NodeClassResolver {
            clients,
            cluster_name: cluster_name.into(),
            kubernetes_version: kubernetes_version.into(),
            dry_run: true,
            validations: Arc::new(Mutex::new(BTreeMap::new())),
            protected: Arc::new(Mutex::new(BTreeMap::new())),
            protection: PROFILE_PROTECTION,
            reservations: super::reservation::shared_availability(),
        }
    }

    /// The resolver syncing the instance counts DescribeCapacityReservations reports into
    /// `availability` (the provider's, [`AwsCloudProvider::reservation_availability`]), so the
    /// reserved offerings the provider lists have them.
    ///
    /// [`AwsCloudProvider::reservation_availability`]: super::provider::AwsCloudProvider::reservation_availability
    pub fn with_reservation_availability(
        mut self,
        availability: super::reservation::SharedAvailability,
    ) -> Self {
        self.reservations = availability;
        self
    }

    /// The resolver keeping profiles it created or replaced from garbage collection for
    /// `protection` (default [`PROFILE_PROTECTION`]).
    pub fn with_profile_protection(mut self, protection: Duration) -> Self {
        self.protection = protection;
        self
    }

    /// The resolver with the dry-run permission checks on (the default) or off (upstream's
    /// `DISABLE_DRY_RUN=true`: `ValidationSucceeded` is set True without calling EC2).
    pub fn with_dry_run(mut self, enabled: bool) -> Self {
        self.dry_run = enabled;
        self
    }

    /// Resolves `class` and computes its status at `now`.
    pub async fn reconcile(
        &self,
        class: &EC2NodeClass,
        now: jiff::Timestamp,
    ) -> Result<Reconciled, ResolveError> {
        let obs = self.observe(class, now).await?;
        Ok(reconcile(class, &obs, now))
    }

    /// What the APIs say about `class`.
    pub async fn observe(
        &self,
        class: &EC2NodeClass,
        now: jiff::Timestamp,
    ) -> Result<Observations, ResolveError> {
        let subnets = self.subnets(class).await?;
        let security_groups = self.security_groups(class).await?;
        let amis = self.amis(class, now).await?;
        let instance_profile = self.instance_profile(class).await;
        let terms = &class.spec.capacity_reservation_selector_terms;
        let capacity_reservations =
            super::reservation::describe(&self.clients, terms, &self.reservations, now)
                .await
                .map(|all| {
                    crate::reservation::status(&crate::reservation::select(terms, &all, now), now)
                });
        let mut obs = Observations {
            amis,
            subnets,
            security_groups,
            instance_profile,
            validation: ValidationObservation::Passed,
            capacity_reservations,
        };
        if self.dry_run {
            // The status the checks launch from: what the other observations make of it.
            let mut resolved = class.clone();
            resolved.status = reconcile(class, &obs, now).status;
            obs.validation = self.validate(&resolved).await?;
        }
        Ok(obs)
    }

    /// The dry-run permission checks of `ValidationSucceeded` for `class` with its resolved
    /// status, in upstream's order: CreateFleet (on-demand, a placeholder launch template),
    /// CreateLaunchTemplate (the class's launch-template data for its first AMI), RunInstances
    /// (that data in the first subnet, tags on instance, volume and network interface). Only
    /// `UnauthorizedOperation` fails the condition (`CreateFleetAuthCheckFailed`, ...); a
    /// throttled or failing check is an error (the class is resolved again later). Skipped
    /// (passed) while a dependency (AMIs, subnets, security groups, instance profile) is not
    /// ready: the condition is `DependenciesNotReady` then anyway. The result is cached for
    /// [`VALIDATION_TTL`] per class and inputs (status subnets, security groups, AMIs, instance
    /// profile, metadata options, block devices, tags).
    pub async fn validate(
        &self,
        class: &EC2NodeClass,
    ) -> Result<ValidationObservation, ResolveError> {
        let status = &class.status;
        let ready = DEPENDENTS
            .iter()
            .filter(|c| **c != VALIDATION_SUCCEEDED)
            .all(|c| {
                status
                    .condition(c)
                    .is_some_and(|x| x.status == karpenter_core::api::ConditionStatus::True)
            });
        let (Some(ami), Some(subnet), Some(profile)) = (
            status.amis.first(),
            status.subnets.first(),
            status.instance_profile.as_deref(),
        ) else {
            return Ok(ValidationObservation::Passed);
        };
        if !ready {
            return Ok(ValidationObservation::Passed);
        }
        let tags =
            crate::launch::launch_tags(&class.spec.tags, &self.cluster_name, "", class.name());
        let key = format!(
            "{}:{}",
            class.name(),
            serde_json::json!([
                status.subnets,
                status.security_groups,
                status.amis,
                profile,
                format!("{:?}", class.spec.resolved_metadata_options()),
                crate::launch::block_device_mappings(class),
                tags,
            ])
        );
        {
            let mut cache = self
                .validations
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            cache.retain(|_, (at, _)| at.elapsed() < VALIDATION_TTL);
            if let Some((_, v)) = cache.get(&key) {
                return Ok(v.clone());
            }
        }
        let arm = ami.requirements.iter().any(|r| {
            r.key == karpenter_core::labels::ARCH && r.values.iter().any(|v| v == "arm64")
        });
        let instance_type = if arm { "m6g.large" } else { "m5.large" };
        let data = super::provider::launch_template_data(class, &ami.id, None, &tags);
        let ec2c = &self.clients.ec2;
        let tag_spec = |r: ec2::ResourceType| {
            ec2::TagSpecification::builder()
                .resource_type(r)
                .set_tags(Some(convert::to_tags(&tags)))
                .build()
        };
        let mut outcomes = Vec::new();
        // CreateFleet with a placeholder launch template: the check is about the permission
        // (and its tag conditions), not the template.
        let fleet = ec2c
            .create_fleet()
            .dry_run(true)
            .r#type(ec2::FleetType::Instant)
            .target_capacity_specification(
                ec2::TargetCapacitySpecificationRequest::builder()
                    .total_target_capacity(1)
                    .default_target_capacity_type(ec2::DefaultTargetCapacityType::OnDemand)
                    .build(),
            )
            .launch_template_configs(
                ec2::FleetLaunchTemplateConfigRequest::builder()
                    .launch_template_specification(
                        ec2::FleetLaunchTemplateSpecificationRequest::builder()
                            .launch_template_name("karpenter-validation")
                            .version("$Latest")
                            .build(),
                    )
                    .overrides(
                        ec2::FleetLaunchTemplateOverridesRequest::builder()
                            .instance_type(ec2::InstanceType::from(instance_type))
                            .subnet_id(&subnet.id)
                            .build(),
                    )
                    .build(),
            )
            .tag_specifications(tag_spec(ec2::ResourceType::Instance))
            .tag_specifications(tag_spec(ec2::ResourceType::Volume))
            .tag_specifications(tag_spec(ec2::ResourceType::Fleet))
            .send()
            .await;
        outcomes.push(dry_run(AuthCheck::CreateFleet, fleet.err()));
        let template = ec2c
            .create_launch_template()
            .dry_run(true)
            .launch_template_name("karpenter-validation")
            .launch_template_data(data)
            .tag_specifications(tag_spec(ec2::ResourceType::LaunchTemplate))
            .send()
            .await;
        outcomes.push(dry_run(AuthCheck::CreateLaunchTemplate, template.err()));
        let metadata = class.spec.resolved_metadata_options();
        let run = ec2c
            .run_instances()
            .dry_run(true)
            .min_count(1)
            .max_count(1)
            .image_id(&ami.id)
            .instance_type(ec2::InstanceType::from(instance_type))
            .iam_instance_profile(
                ec2::IamInstanceProfileSpecification::builder()
                    .name(profile)
                    .build(),
            )
            .network_interfaces(
                ec2::InstanceNetworkInterfaceSpecification::builder()
                    .device_index(0)
                    .subnet_id(&subnet.id)
                    .set_associate_public_ip_address(class.spec.associate_public_ip_address)
                    .set_groups(Some(
                        status
                            .security_groups
                            .iter()
                            .map(|g| g.id.clone())
                            .collect(),
                    ))
                    .build(),
            )
            .metadata_options(
                ec2::InstanceMetadataOptionsRequest::builder()
                    .http_endpoint(ec2::InstanceMetadataEndpointState::from(
                        metadata.http_endpoint.as_str(),
                    ))
                    .http_put_response_hop_limit(
                        i32::try_from(metadata.http_put_response_hop_limit).unwrap_or(1),
                    )
                    .http_tokens(ec2::HttpTokensState::from(metadata.http_tokens.as_str()))
                    .build(),
            )
            .tag_specifications(tag_spec(ec2::ResourceType::Instance))
            .tag_specifications(tag_spec(ec2::ResourceType::Volume))
            .tag_specifications(tag_spec(ec2::ResourceType::NetworkInterface))
            .send()
            .await;
        outcomes.push(dry_run(AuthCheck::RunInstances, run.err()));
        let Some(observation) = instanceprofile::validation_observation(&outcomes) else {
            return Err(ResolveError {
                call: "dry-run permission checks",
                message: "throttled or unavailable; retried at the next reconcile".into(),
            });
        };
        self.validations
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(key, (Instant::now(), observation.clone()));
        Ok(observation)
    }

    /// The subnets of the class's terms (one DescribeSubnets per filter set, de-duplicated).
    pub async fn subnets(&self, class: &EC2NodeClass) -> Result<Vec<SubnetInfo>, ResolveError> {
        let ec2c = &self.clients.ec2;
        describe_by_filter_sets(
            resolve::subnet_filter_sets(&class.spec.subnet_selector_terms),
            |filters| async move {
                let resp = ec2c
                    .describe_subnets()
                    .set_filters(Some(filters))
                    .send()
                    .await
                    .map_err(fail("DescribeSubnets"))?;
                Ok(resp.subnets().iter().map(convert::subnet).collect())
            },
            |s: &SubnetInfo| s.id.clone(),
        )
        .await
    }

    /// The security groups of the class's terms (one DescribeSecurityGroups per filter set,
    /// de-duplicated).
    pub async fn security_groups(
        &self,
        class: &EC2NodeClass,
    ) -> Result<Vec<SecurityGroupInfo>, ResolveError> {
        let ec2c = &self.clients.ec2;
        describe_by_filter_sets(
            resolve::security_group_filter_sets(&class.spec.security_group_selector_terms),
            |filters| async move {
                let resp = ec2c
                    .describe_security_groups()
                    .set_filters(Some(filters))
                    .send()
                    .await
                    .map_err(fail("DescribeSecurityGroups"))?;
                Ok(resp
                    .security_groups()
                    .iter()
                    .map(convert::security_group)
                    .collect())
            },
            |g: &SecurityGroupInfo| g.id.clone(),
        )
        .await
    }

    async fn images(
        &self,
        filters: &[Filter],
        owners: &[String],
    ) -> Result<Vec<Image>, ResolveError> {
        let mut filters: Vec<ec2::Filter> = filters.iter().map(convert::filter).collect();
        filters.push(
            ec2::Filter::builder()
                .name("state")
                .values("available")
                .build(),
        );
        let resp = self
            .clients
            .ec2
            .describe_images()
            .set_filters(Some(filters))
            .set_owners((!owners.is_empty()).then(|| owners.to_vec()))
            .include_deprecated(true)
            .send()
            .await
            .map_err(fail("DescribeImages"))?;
        Ok(resp.images().iter().map(convert::image).collect())
    }

    async fn ssm_value(&self, name: &str) -> Result<Option<String>, ResolveError> {
        match self.clients.ssm.get_parameter().name(name).send().await {
            Ok(out) => Ok(out.parameter().and_then(|p| p.value()).map(str::to_string)),
            Err(e) => {
                let svc = e.as_service_error();
                if svc.is_some_and(|s| s.is_parameter_not_found()) {
                    Ok(None)
                } else {
                    Err(ResolveError {
                        call: "GetParameter",
                        message: display_chain(&e),
                    })
                }
            }
        }
    }

    /// The class's AMIs: alias terms through SSM, other terms through DescribeImages, then one
    /// image per requirement set in upstream's order.
    pub async fn amis(
        &self,
        class: &EC2NodeClass,
        now: jiff::Timestamp,
    ) -> Result<AmiObservation, ResolveError> {
        let terms = &class.spec.ami_selector_terms;
        if let Some(alias) = class.spec.alias() {
            let params = match ami::alias_parameters(&alias, &self.kubernetes_version) {
                Ok(p) => p,
                Err(e) => return Ok(AmiObservation::UnsupportedAlias(e.to_string())),
            };
            let mut values = BTreeMap::new();
            for p in &params {
                if let Some(v) = self.ssm_value(&p.name).await? {
                    values.insert(p.name.clone(), v);
                }
            }
            let ids: Vec<String> = values.values().cloned().collect();
            let images = if ids.is_empty() {
                Vec::new()
            } else {
                self.images(&[Filter::new("image-id", ids)], &[]).await?
            };
            let raw = terms
                .iter()
                .find_map(|t| t.alias.clone())
                .unwrap_or_default();
            return Ok(
                match ami::alias_candidates(&raw, &params, &values, &images) {
                    Ok(c) => AmiObservation::Resolved(ami::select_images(c, now)),
                    Err(_) => AmiObservation::Resolved(Vec::new()),
                },
            );
        }
        let mut ssm_ids = Vec::new();
        for t in terms {
            if let Some(p) = &t.ssm_parameter
                && let Some(v) = self.ssm_value(p).await?
            {
                ssm_ids.push(v);
            }
        }
        let mut images = Vec::new();
        for q in ami::image_queries(terms, &ssm_ids) {
            images.extend(self.images(&q.filters, &q.owners).await?);
        }
        Ok(AmiObservation::Resolved(ami::select_images(
            ami::term_candidates(&images),
            now,
        )))
    }

    async fn get_profile(&self, name: &str) -> Result<Option<ProfileInfo>, String> {
        match self
            .clients
            .iam
            .get_instance_profile()
            .instance_profile_name(name)
            .send()
            .await
        {
            Ok(out) => Ok(out.instance_profile().map(|p| ProfileInfo {
                name: p.instance_profile_name().to_string(),
                path: p.path().to_string(),
                roles: p
                    .roles()
                    .iter()
                    .map(|r| r.role_name().to_string())
                    .collect(),
            })),
            Err(e) => {
                if e.as_service_error()
                    .is_some_and(|s| s.is_no_such_entity_exception())
                {
                    Ok(None)
                } else {
                    Err(format!("GetInstanceProfile: {}", display_chain(&e)))
                }
            }
        }
    }

    /// The instance profile nodes launch with: `spec.instanceProfile` as is, or the profile
    /// managed for `spec.role`. The status's profile is kept while it holds the role;
    /// otherwise the profile named for the class and role ([`instanceprofile::profile_name`])
    /// is looked up with GetInstanceProfile, created when missing (upstream's path and tags;
    /// `EntityAlreadyExists` counts as found) and given the role. The name is deterministic,
    /// so a reconcile whose status was never written back finds the profile instead of
    /// creating another, and a failed step is simply retried next time (upstream deletes the
    /// half-made profile instead, as its names are random). The new profile and the one it
    /// replaces are protected from garbage collection for [`PROFILE_PROTECTION`]. `Err` carries
    /// the message of `InstanceProfileReady=False`.
    pub async fn instance_profile(&self, class: &EC2NodeClass) -> Result<String, String> {
        let old = class.status.instance_profile.as_deref();
        if let Some(p) = &class.spec.instance_profile {
            // Switching from spec.role: the managed profile nodes may still use is kept a while.
            if let Some(old) = old.filter(|o| *o != p) {
                self.protect(old);
            }
            return Ok(p.clone());
        }
        let current = match old {
            Some(name) => self.get_profile(name).await?,
            None => None,
        };
        let want = match instanceprofile::decide_profile(
            class,
            current.as_ref(),
            &self.cluster_name,
            &self.clients.region,
        ) {
            ProfileAction::Use(name) => return Ok(name),
            ProfileAction::Ensure(want) => want,
        };
        self.protect(&want.name);
        if let Some(old) = old.filter(|o| *o != want.name) {
            self.protect(old);
        }
        let iam = &self.clients.iam;
        let iam_err = |call: &str, e: &(dyn std::error::Error + 'static)| {
            format!("{call}: {}", error_text(e))
        };
        let profile = match self.get_profile(&want.name).await? {
            Some(found) => found,
            None => {
                let tags: Vec<aws_sdk_iam::types::Tag> = want
                    .tags
                    .iter()
                    .filter_map(|(k, v)| {
                        aws_sdk_iam::types::Tag::builder()
                            .key(k)
                            .value(v)
                            .build()
                            .ok()
                    })
                    .collect();
                let created = iam
                    .create_instance_profile()
                    .instance_profile_name(&want.name)
                    .path(&want.path)
                    .set_tags(Some(tags))
                    .send()
                    .await;
                match created {
                    Ok(_) => ProfileInfo {
                        name: want.name.clone(),
                        path: want.path.clone(),
                        roles: Vec::new(),
                    },
                    Err(e)
                        if e.as_service_error()
                            .is_some_and(|s| s.is_entity_already_exists_exception()) =>
                    {
                        // Created since the look-up (another replica, or an earlier attempt IAM
                        // had not made visible yet): use it.
                        self.get_profile(&want.name).await?.unwrap_or(ProfileInfo {
                            name: want.name.clone(),
                            path: want.path.clone(),
                            roles: Vec::new(),
                        })
                    }
                    Err(e) => return Err(iam_err("CreateInstanceProfile", &e)),
                }
            }
        };
        let steps = instanceprofile::role_steps(&profile, &want.role);
        for r in &steps.remove {
            iam.remove_role_from_instance_profile()
                .instance_profile_name(&want.name)
                .role_name(r)
                .send()
                .await
                .map_err(|e| iam_err("RemoveRoleFromInstanceProfile", &e))?;
        }
        if steps.add {
            iam.add_role_to_instance_profile()
                .instance_profile_name(&want.name)
                .role_name(&want.role)
                .send()
                .await
                .map_err(|e| iam_err("AddRoleToInstanceProfile", &e))?;
        }
        Ok(want.name)
    }

    /// Keeps `name` from garbage collection for the protection period, from now.
    fn protect(&self, name: &str) {
        self.protected
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(name.to_string(), Instant::now());
    }

    /// Deletes the instance profiles managed for `class` (their roles removed first), as the
    /// class's finalizer does: every profile under the class's IAM path (one per role it had),
    /// and the one its status names. A profile given by `spec.instanceProfile` is the user's
    /// and is left alone; a profile already gone is fine.
    pub async fn delete_instance_profile(&self, class: &EC2NodeClass) -> Result<(), String> {
        let uid = class.metadata.uid.as_deref().unwrap_or(class.name());
        let path = instanceprofile::profile_path(&self.clients.region, &self.cluster_name, uid);
        let listed = self.list_profiles(&path).await.map_err(|e| e.to_string())?;
        let mut doomed: Vec<ProfileInfo> =
            instanceprofile::class_profiles(&listed, &self.clients.region, &self.cluster_name, uid)
                .into_iter()
                .cloned()
                .collect();
        if class.spec.instance_profile.is_none()
            && let Some(name) = &class.status.instance_profile
            && !doomed.iter().any(|p| &p.name == name)
            && let Some(profile) = self.get_profile(name).await?
        {
            doomed.push(profile);
        }
        for p in &doomed {
            self.delete_profile(p).await?;
        }
        Ok(())
    }

    /// The instance profiles under `prefix` (ListInstanceProfiles, every page).
    async fn list_profiles(&self, prefix: &str) -> Result<Vec<ProfileInfo>, ResolveError> {
        let mut listed = Vec::new();
        let mut marker = None;
        loop {
            let page = self
                .clients
                .iam
                .list_instance_profiles()
                .path_prefix(prefix)
                .set_marker(marker)
                .send()
                .await
                .map_err(|e| ResolveError {
                    call: "ListInstanceProfiles",
                    message: display_chain(&e),
                })?;
            for p in page.instance_profiles() {
                listed.push(ProfileInfo {
                    name: p.instance_profile_name().to_string(),
                    path: p.path().to_string(),
                    roles: p
                        .roles()
                        .iter()
                        .map(|r| r.role_name().to_string())
                        .collect(),
                });
            }
            marker = page
                .marker()
                .filter(|m| page.is_truncated() && !m.is_empty())
                .map(str::to_string);
            if marker.is_none() {
                break;
            }
        }
        Ok(listed)
    }

    /// Removes the profile's roles and deletes it (already gone: done, as upstream).
    async fn delete_profile(&self, profile: &ProfileInfo) -> Result<(), String> {
        let iam = &self.clients.iam;
        let name = &profile.name;
        for r in &profile.roles {
            iam.remove_role_from_instance_profile()
                .instance_profile_name(name)
                .role_name(r)
                .send()
                .await
                .map_err(|e| format!("RemoveRoleFromInstanceProfile: {}", error_text(&e)))?;
        }
        match iam
            .delete_instance_profile()
            .instance_profile_name(name)
            .send()
            .await
        {
            Ok(_) => Ok(()),
            Err(e)
                if e.as_service_error()
                    .is_some_and(|s| s.is_no_such_entity_exception()) =>
            {
                Ok(())
            }
            Err(e) => Err(format!("DeleteInstanceProfile: {}", error_text(&e))),
        }
    }

    /// Garbage-collects the instance profiles the resolver manages for this cluster (IAM
    /// ListInstanceProfiles under `/karpenter/{region}/{cluster}/`, the path checked here too):
    /// a profile no class in `classes` lists in its status, not created or replaced within
    /// the protection period ([`PROFILE_PROTECTION`]) and not named by a live NodeClaim (`in_use`, the
    /// `karpenter.k8s.aws/instance-profile-name` annotations) is deleted, as upstream. Run it
    /// every [`PROFILE_GC_INTERVAL`]; returns the deleted names.
    pub async fn garbage_collect_instance_profiles(
        &self,
        classes: &[EC2NodeClass],
        in_use: &BTreeSet<String>,
    ) -> Result<Vec<String>, ResolveError> {
        let prefix = instanceprofile::cluster_path(&self.clients.region, &self.cluster_name);
        let listed = self.list_profiles(&prefix).await?;
        let referenced: BTreeSet<String> = classes
            .iter()
            .filter_map(|c| c.status.instance_profile.clone())
            .collect();
        let protected: BTreeSet<String> = {
            let mut p = self
                .protected
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            p.retain(|_, at| at.elapsed() < self.protection);
            p.keys().cloned().collect()
        };
        let garbage = instanceprofile::garbage_profiles(
            &listed,
            &self.clients.region,
            &self.cluster_name,
            &referenced,
            &protected,
            in_use,
        );
        let mut deleted = Vec::new();
        for name in garbage {
            if let Some(p) = listed.iter().find(|p| p.name == name) {
                self.delete_profile(p)
                    .await
                    .map_err(|message| ResolveError {
                        call: "DeleteInstanceProfile",
                        message,
                    })?;
                deleted.push(name);
            }
        }
        Ok(deleted)
    }
}

/// The meaning of a dry run's answer (`None`: the call succeeded, which a dry run never does
/// on EC2, so a permitted call).
fn dry_run<E>(check: AuthCheck, err: Option<aws_sdk_ec2::error::SdkError<E>>) -> DryRunOutcome
where
    E: ProvideErrorMetadata + std::error::Error + 'static,
{
    match err {
        None => instanceprofile::dry_run_outcome(check, None, ""),
        Some(e) => {
            let (code, message) = error_code(&e);
            instanceprofile::dry_run_outcome(check, Some(&code), &message)
        }
    }
}

fn error_text(e: &(dyn std::error::Error + 'static)) -> String {
    display_chain(e)
}
