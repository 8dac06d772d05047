//! `karpenter controller`: picks the provider that `--cloud-provider` names and runs
//! [`karpenter_controller::run`] with it.

use std::sync::Arc;

use k8s_openapi::api::core::v1::Node;
use karpenter_controller::kwok_upstream::UpstreamKwokCloudProvider;
use karpenter_controller::settings::CloudProviderKind;
use karpenter_controller::{ControllerArgs, ControllerError, PlainProvider, Provider};
use karpenter_plan::catalog::{Catalog, CatalogSpec};
use kube::{Api, Client};

/// Runs the controller with the provider of `args.cloud_provider` until SIGTERM or SIGINT.
pub fn run_blocking(args: ControllerArgs) -> Result<(), ControllerError> {
    let kind = args.cloud_provider;
    let settings = args.clone();
    karpenter_controller::run_blocking(args, move |client| async move {
        provider(kind, client, &settings).await
    })
}

async fn provider(
    kind: CloudProviderKind,
    client: Client,
    args: &ControllerArgs,
) -> Result<Box<dyn Provider>, ControllerError> {
    match kind {
        #[cfg(feature = "aws")]
        CloudProviderKind::Aws => Ok(Box::new(
            karpenter_controller::aws::AwsProvider::new(&client, args).await?,
        )),
        #[cfg(not(feature = "aws"))]
        CloudProviderKind::Aws => {
            let _ = client;
            Err(ControllerError::CloudProvider(
                "--cloud-provider aws needs the AWS SDK, which this build leaves out: build \
                 with `cargo build --release -p karpenter-cli --features aws` (the release \
                 image does); use --cloud-provider fake to run against kwok nodes"
                    .to_string(),
            ))
        }
        CloudProviderKind::Fake => {
            let spec: CatalogSpec = args
                .catalog
                .parse()
                .map_err(|e| ControllerError::Settings(format!("--catalog: {e}")))?;
            let mut catalog = Catalog::load(&spec, None)
                .map_err(|e| ControllerError::Settings(format!("--catalog {spec}: {e}")))?;
            let types = catalog
                .instance_types_for(None)
                .map_err(|e| ControllerError::Settings(format!("--catalog {spec}: {e}")))?;
            tracing::info!(catalog = %spec, instance_types = types.len(), "fake cloud provider: instances are kwok Nodes");
            let cloud = karpenter_controller::kwok::KwokCloudProvider::new(
                Api::<Node>::all(client),
                types,
                catalog.policy.clone(),
            )
            .with_instance_names(args.fake_instance_names);
            Ok(Box::new(PlainProvider::new(Arc::new(cloud))))
        }
        CloudProviderKind::Kwok => {
            tracing::info!(
                instance_types = karpenter_fake::kwok::INSTANCE_TYPE_COUNT,
                "kwok cloud provider: upstream's kwok provider (KWOKNodeClass, kwok catalog)"
            );
            let cloud = UpstreamKwokCloudProvider::new(client);
            Ok(Box::new(PlainProvider::new(Arc::new(cloud))))
        }
    }
}
