//! The marker functions the dialect leaves where a clause was, for a planner rule to find.
//!
//! A marker only carries its clause through DataFusion's SQL planner (name resolution, type
//! coercion, subqueries) to the analyzer rule that replaces it. It is never evaluated: a
//! marker still in a plan at run time stood where its clause does not belong, and fails with
//! a message saying where the clause goes. Markers are volatile, so that nothing folds them.

use datafusion::arrow::datatypes::DataType;
use datafusion::common::{DataFusionError, Result as DfResult};
use datafusion::logical_expr::{
    ColumnarValue, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, TypeSignature,
    Volatility,
};

/// The marker function `name`, taking `arguments` as `signature` says.
pub(crate) fn marker(
    name: &'static str,
    arguments: TypeSignature,
    misplaced: &'static str,
) -> ScalarUDF {
    ScalarUDF::new_from_impl(Marker {
        name,
        signature: Signature::new(arguments, Volatility::Volatile),
        misplaced,
    })
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct Marker {
    name: &'static str,
    signature: Signature,
    /// What the error of a marker evaluated at run time says.
    misplaced: &'static str,
}

impl ScalarUDFImpl for Marker {
    fn name(&self) -> &str {
        self.name
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _: &[DataType]) -> DfResult<DataType> {
        Ok(DataType::Boolean)
    }

    fn invoke_with_args(&self, _: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        Err(DataFusionError::Plan(self.misplaced.into()))
    }
}
