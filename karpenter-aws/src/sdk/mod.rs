//! The I/O shell on the AWS SDK for Rust (feature `sdk`): the calls upstream's AWS provider
//! makes, translated into and out of this crate's sans-IO decisions.
//!
//! - [`AwsClients`]: one EC2, SSM, IAM, SQS, EKS and Pricing client sharing one HTTP client
//!   (hyper + rustls on ring, no aws-lc-sys); [`AwsClients::from_env`] for a real cluster,
//!   [`AwsClients::with_endpoint`] for a local endpoint such as moto.
//! - [`provider::AwsCloudProvider`]: karpenter-core's `CloudProvider` on EC2 (instance types
//!   from DescribeInstanceTypes + DescribeInstanceTypeOfferings through the catalog
//!   conversion, launch templates, CreateFleet, DescribeInstances, TerminateInstances).
//! - [`nodeclass`]: EC2NodeClass status through DescribeSubnets, DescribeSecurityGroups, SSM,
//!   DescribeImages and IAM, fed into [`crate::nodeclass::reconcile::reconcile`].
//! - [`reservation`]: DescribeCapacityReservations and the reservation availability the
//!   node-class loop and the provider share.
//! - [`pricing`]: the Price List API client behind [`crate::pricing::PricingApi`] and spot
//!   prices from DescribeSpotPriceHistory.
//! - [`interruption`]: the SQS interruption-queue consumer.
//! - [`cluster`]: `eks:DescribeCluster` for the settings the user did not give.

pub mod cluster;
pub mod convert;
pub mod interruption;
pub mod nodeclass;
pub mod pricing;
pub mod provider;
pub mod reservation;

/// The SDK crates this shell is built on, re-exported so that embedders and tests name the
/// same versions (request and response types, `Credentials`).
pub use {aws_credential_types, aws_sdk_ec2, aws_sdk_eks, aws_sdk_iam, aws_sdk_sqs, aws_sdk_ssm};

use std::time::Duration;

use aws_config::BehaviorVersion;
use aws_config::Region;
use aws_credential_types::Credentials;
use aws_smithy_http_client::tls;
use aws_smithy_runtime_api::client::http::SharedHttpClient;
use aws_smithy_types::error::metadata::ProvideErrorMetadata;
use aws_smithy_types::timeout::TimeoutConfig;

/// Upstream's timeout for every AWS call (all SDK clients share one HTTP client with a 4 minute
/// timeout).
pub const OPERATION_TIMEOUT: Duration = Duration::from_secs(240);

/// The HTTP client every SDK client uses: hyper with rustls on ring (the crypto provider kube
/// already uses), plain HTTP allowed for local endpoints.
pub fn http_client() -> SharedHttpClient {
    aws_smithy_http_client::Builder::new()
        .tls_provider(tls::Provider::Rustls(
            tls::rustls_provider::CryptoMode::Ring,
        ))
        .build_https()
}

/// The SDK clients the provider uses, built from one shared configuration.
#[derive(Debug, Clone)]
pub struct AwsClients {
    /// EC2.
    pub ec2: aws_sdk_ec2::Client,
    /// SSM (AMI alias parameters).
    pub ssm: aws_sdk_ssm::Client,
    /// IAM (instance profiles).
    pub iam: aws_sdk_iam::Client,
    /// SQS (the interruption queue).
    pub sqs: aws_sdk_sqs::Client,
    /// EKS (DescribeCluster, for the settings the user did not give).
    pub eks: aws_sdk_eks::Client,
    /// The Price List API, in its own region ([`crate::pricing::pricing_region`]).
    pub pricing: aws_sdk_pricing::Client,
    /// The region of the EC2, SSM and SQS clients.
    pub region: String,
}

impl AwsClients {
    /// Clients from the standard AWS configuration chain (environment, profile, web identity
    /// for IRSA / EKS Pod Identity, IMDS), in `region` when given, else the configured one.
    pub async fn from_env(region: Option<String>) -> Result<Self, SdkSetupError> {
        let mut loader = aws_config::defaults(BehaviorVersion::latest())
            .http_client(http_client())
            .timeout_config(
                TimeoutConfig::builder()
                    .operation_timeout(OPERATION_TIMEOUT)
                    .build(),
            );
        if let Some(r) = region {
            loader = loader.region(Region::new(r));
        }
        let conf = loader.load().await;
        Self::from_sdk_config(&conf)
    }

    /// Clients for a local endpoint (moto): every service at `endpoint`, static
    /// credentials, `region`. `http` replaces the HTTP client (a fault-injecting wrapper in
    /// tests); `None` uses [`http_client`].
    pub async fn with_endpoint(
        endpoint: &str,
        region: &str,
        credentials: Credentials,
        http: Option<SharedHttpClient>,
    ) -> Result<Self, SdkSetupError> {
        let conf = aws_config::defaults(BehaviorVersion::latest())
            .http_client(http.unwrap_or_else(http_client))
            .region(Region::new(region.to_string()))
            .endpoint_url(endpoint)
            .credentials_provider(credentials)
            .timeout_config(
                TimeoutConfig::builder()
                    .operation_timeout(OPERATION_TIMEOUT)
                    .build(),
            )
            .load()
            .await;
        Self::from_sdk_config(&conf)
    }

    /// Clients from a loaded SDK configuration.
    pub fn from_sdk_config(conf: &aws_config::SdkConfig) -> Result<Self, SdkSetupError> {
        let region = conf
            .region()
            .map(|r| r.as_ref().to_string())
            .ok_or(SdkSetupError::NoRegion)?;
        let pricing_conf = aws_sdk_pricing::config::Builder::from(conf)
            .region(Region::new(
                crate::pricing::pricing_region(&region).to_string(),
            ))
            .build();
        Ok(AwsClients {
            ec2: aws_sdk_ec2::Client::new(conf),
            ssm: aws_sdk_ssm::Client::new(conf),
            iam: aws_sdk_iam::Client::new(conf),
            sqs: aws_sdk_sqs::Client::new(conf),
            eks: aws_sdk_eks::Client::new(conf),
            pricing: aws_sdk_pricing::Client::from_conf(pricing_conf),
            region,
        })
    }
}

/// Why the SDK clients could not be built.
#[derive(Debug, thiserror::Error)]
pub enum SdkSetupError {
    /// Neither the options nor the environment name a region.
    #[error("no AWS region: set AWS_REGION (or the controller's --aws-region)")]
    NoRegion,
}

/// The error code and message of an SDK error (`InvalidInstanceID.NotFound`, ...); for errors
/// without service metadata (timeouts, connection failures) the code is empty and the message
/// is the error's display chain.
pub fn error_code<E>(err: &aws_sdk_ec2::error::SdkError<E>) -> (String, String)
where
    E: ProvideErrorMetadata + std::error::Error + 'static,
{
    match err.as_service_error() {
        Some(e) => (
            e.code().unwrap_or_default().to_string(),
            e.message().unwrap_or_default().to_string(),
        ),
        None => (String::new(), display_chain(err)),
    }
}

/// `err` and its sources, joined with `: `.
pub fn display_chain(err: &(dyn std::error::Error + 'static)) -> String {
    let mut out = err.to_string();
    let mut cur = err.source();
    while let Some(e) = cur {
        out.push_str(": ");
        out.push_str(&e.to_string());
        cur = e.source();
    }
    out
}
