//! Why no plan was made ([`PlanError`]), and what each lower error means for the exit status.

use karpenter_core::world::WorldError;

use crate::catalog::CatalogLoadError;
use crate::manifests::ManifestError;

/// Why no plan was made.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlanError {
    /// Invalid input: exit status 2.
    #[error("{0}")]
    Input(String),
    /// A bug or broken embedded data: exit status 1.
    #[error("internal error: {0}")]
    Internal(String),
}

impl PlanError {
    /// The process exit status for this error.
    pub fn exit_code(&self) -> i32 {
        match self {
            PlanError::Input(_) => 2,
            PlanError::Internal(_) => 1,
        }
    }
}

impl From<ManifestError> for PlanError {
    fn from(e: ManifestError) -> Self {
        PlanError::Input(e.to_string())
    }
}

impl From<WorldError> for PlanError {
    fn from(e: WorldError) -> Self {
        PlanError::Input(e.to_string())
    }
}

impl From<CatalogLoadError> for PlanError {
    fn from(e: CatalogLoadError) -> Self {
        match e {
            CatalogLoadError::Input(m) => PlanError::Input(m),
            CatalogLoadError::Internal(m) => PlanError::Internal(m),
        }
    }
}
