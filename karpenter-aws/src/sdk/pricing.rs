//! The Price List API client behind [`crate::pricing::PricingApi`]: one `GetProducts` call per
//! request, its `PriceList` strings handed to [`crate::pricing::parse_price_list`] by
//! [`crate::pricing`]'s refresh.

use aws_sdk_pricing::types::{Filter, FilterType};

use super::display_chain;
use crate::pricing::{GetProductsPage, GetProductsRequest, PricingApi, PricingError};

/// [`PricingApi`] on `aws-sdk-pricing`.
#[derive(Debug, Clone)]
pub struct SdkPricing {
    client: aws_sdk_pricing::Client,
}

impl SdkPricing {
    /// A Price List client (already in its pricing region,
    /// [`crate::pricing::pricing_region`]).
    pub fn new(client: aws_sdk_pricing::Client) -> Self {
        SdkPricing { client }
    }
}

/// The SDK filters of a request (all `TERM_MATCH`).
pub fn sdk_filters(request: &GetProductsRequest) -> Result<Vec<Filter>, PricingError> {
    request
        .filters
        .iter()
        .map(|f| {
            Filter::builder()
                .r#type(FilterType::TermMatch)
                .field(&f.field)
                .value(&f.value)
                .build()
                .map_err(|e| PricingError::Api(e.to_string()))
        })
        .collect()
}

#[async_trait::async_trait]
impl PricingApi for SdkPricing {
    async fn get_products(
        &self,
        request: &GetProductsRequest,
    ) -> Result<GetProductsPage, PricingError> {
        let out = self
            .client
            .get_products()
            .service_code(&request.service_code)
            .set_filters(Some(sdk_filters(request)?))
            .max_results(request.max_results)
            .set_next_token(request.next_token.clone())
            .send()
            .await
            .map_err(|e| PricingError::Api(display_chain(&e)))?;
        Ok(GetProductsPage {
            price_list: out.price_list().to_vec(),
            next_token: out.next_token().map(str::to_string),
        })
    }
}
