//! EC2NodeClass status through the AWS APIs: DescribeSubnets and DescribeSecurityGroups for the
//! selector terms, SSM GetParameter for alias terms and DescribeImages for every AMI term, the
//! instance profile created from `spec.role` through IAM (and deleted with the class), all fed
//! into [`crate::nodeclass::reconcile::reconcile`].

use std::collections::BTreeMap;

use aws_sdk_ec2::types as ec2;
use aws_smithy_types::error::metadata::ProvideErrorMetadata;

use super::{AwsClients, convert, display_chain, error_code};
use crate::ami::{self, Image};
use crate::instanceprofile::{self, ProfileAction, ProfileInfo};
use crate::nodeclass::EC2NodeClass;
use crate::nodeclass::reconcile::{
    AmiObservation, Observations, Reconciled, ValidationObservation, reconcile,
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

/// Resolves EC2NodeClasses for one cluster.
#[derive(Debug, Clone)]
pub struct NodeClassResolver {
    clients: AwsClients,
    cluster_name: String,
    kubernetes_version: String,
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
        }
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
        Ok(Observations {
            amis,
            subnets,
            security_groups,
            instance_profile,
            validation: ValidationObservation::Passed,
        })
    }

    /// The subnets of the class's terms (one DescribeSubnets per filter set, de-duplicated).
    pub async fn subnets(&self, class: &EC2NodeClass) -> Result<Vec<SubnetInfo>, ResolveError> {
        let mut out: BTreeMap<String, SubnetInfo> = BTreeMap::new();
        for set in resolve::subnet_filter_sets(&class.spec.subnet_selector_terms) {
            let resp = self
                .clients
                .ec2
                .describe_subnets()
                .set_filters(Some(set.iter().map(convert::filter).collect()))
                .send()
                .await
                .map_err(fail("DescribeSubnets"))?;
            for s in resp.subnets() {
                let s = convert::subnet(s);
                out.insert(s.id.clone(), s);
            }
        }
        Ok(out.into_values().collect())
    }

    /// The security groups of the class's terms.
    pub async fn security_groups(
        &self,
        class: &EC2NodeClass,
    ) -> Result<Vec<SecurityGroupInfo>, ResolveError> {
        let mut out: BTreeMap<String, SecurityGroupInfo> = BTreeMap::new();
        for set in resolve::security_group_filter_sets(&class.spec.security_group_selector_terms) {
            let resp = self
                .clients
                .ec2
                .describe_security_groups()
                .set_filters(Some(set.iter().map(convert::filter).collect()))
                .send()
                .await
                .map_err(fail("DescribeSecurityGroups"))?;
            for g in resp.security_groups() {
                let g = convert::security_group(g);
                out.insert(g.id.clone(), g);
            }
        }
        Ok(out.into_values().collect())
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
    /// managed for `spec.role` (created with upstream's name, path and tags, its role swapped
    /// when the spec changes). `Err` carries the message of `InstanceProfileReady=False`.
    pub async fn instance_profile(&self, class: &EC2NodeClass) -> Result<String, String> {
        if let Some(p) = &class.spec.instance_profile {
            return Ok(p.clone());
        }
        let current = match &class.status.instance_profile {
            Some(name) => self.get_profile(name).await?,
            None => None,
        };
        let nonce = jiff::Timestamp::now().as_nanosecond().to_string();
        let iam = &self.clients.iam;
        let iam_err = |call: &str, e: &(dyn std::error::Error + 'static)| {
            format!("{call}: {}", error_text(e))
        };
        match instanceprofile::decide_profile(
            class,
            current.as_ref(),
            &self.cluster_name,
            &self.clients.region,
            &nonce,
        ) {
            ProfileAction::Use(name) => Ok(name),
            ProfileAction::Create {
                name,
                path,
                tags,
                role,
            } => {
                let tags: Vec<aws_sdk_iam::types::Tag> = tags
                    .iter()
                    .filter_map(|(k, v)| {
                        aws_sdk_iam::types::Tag::builder()
                            .key(k)
                            .value(v)
                            .build()
                            .ok()
                    })
                    .collect();
                iam.create_instance_profile()
                    .instance_profile_name(&name)
                    .path(&path)
                    .set_tags(Some(tags))
                    .send()
                    .await
                    .map_err(|e| iam_err("CreateInstanceProfile", &e))?;
                iam.add_role_to_instance_profile()
                    .instance_profile_name(&name)
                    .role_name(&role)
                    .send()
                    .await
                    .map_err(|e| iam_err("AddRoleToInstanceProfile", &e))?;
                Ok(name)
            }
            ProfileAction::ReplaceRole { name, remove, add } => {
                for r in remove {
                    iam.remove_role_from_instance_profile()
                        .instance_profile_name(&name)
                        .role_name(&r)
                        .send()
                        .await
                        .map_err(|e| iam_err("RemoveRoleFromInstanceProfile", &e))?;
                }
                iam.add_role_to_instance_profile()
                    .instance_profile_name(&name)
                    .role_name(&add)
                    .send()
                    .await
                    .map_err(|e| iam_err("AddRoleToInstanceProfile", &e))?;
                Ok(name)
            }
        }
    }

    /// Deletes the instance profile managed for `class` (its roles removed first), as the
    /// class's finalizer does. A profile given by `spec.instanceProfile` is the user's and is
    /// left alone; a profile already gone is fine.
    pub async fn delete_instance_profile(&self, class: &EC2NodeClass) -> Result<(), String> {
        if class.spec.instance_profile.is_some() {
            return Ok(());
        }
        let Some(name) = &class.status.instance_profile else {
            return Ok(());
        };
        let Some(profile) = self.get_profile(name).await? else {
            return Ok(());
        };
        let iam = &self.clients.iam;
        for r in &profile.roles {
            iam.remove_role_from_instance_profile()
                .instance_profile_name(name)
                .role_name(r)
                .send()
                .await
                .map_err(|e| format!("RemoveRoleFromInstanceProfile: {}", error_text(&e)))?;
        }
        iam.delete_instance_profile()
            .instance_profile_name(name)
            .send()
            .await
            .map_err(|e| format!("DeleteInstanceProfile: {}", error_text(&e)))?;
        Ok(())
    }
}

fn error_text(e: &(dyn std::error::Error + 'static)) -> String {
    display_chain(e)
}
