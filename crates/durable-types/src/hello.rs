//! `GET /hello` and `POST /hello` (contract §3).

use serde::{Deserialize, Serialize};

use crate::CapsView;

/// A range of wire versions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct WireRange {
    /// The lowest version.
    pub min: u32,
    /// The highest version.
    pub max: u32,
}

impl WireRange {
    /// The range this SDK speaks.
    pub const SDK: WireRange = WireRange { min: crate::WIRE_MIN, max: crate::WIRE_MAX };

    /// Whether the two ranges share a version.
    pub fn overlaps(self, other: WireRange) -> bool {
        self.min <= other.max && other.min <= self.max
    }

    /// `v2` for a single version, `v2..3` for a range.
    pub fn label(self) -> String {
        if self.min == self.max { format!("v{}", self.min) } else { format!("v{}..{}", self.min, self.max) }
    }
}

/// The SDK's name and version.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SdkInfo {
    /// `durable-sdk`.
    pub name: String,
    /// The crate version.
    pub version: String,
}

/// `GET /hello`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HelloResponse {
    /// Always true.
    pub ok: bool,
    /// The versions the agent speaks.
    pub wire: WireRange,
    /// The SDK.
    pub sdk: SdkInfo,
    /// The agent's host name.
    pub host: String,
    /// The runtime (`rust`).
    pub runtime: String,
    /// Whether the program called `ready()`.
    pub ready: bool,
    /// 16 random hex characters chosen at each start.
    pub epoch: String,
    /// `on`, `off`, `unavailable` or `token`.
    pub caller_check: String,
    /// Every capability, true or false.
    pub caps: CapsView,
}

/// Collie's own version, in `POST /hello`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CollieInfo {
    /// E.g. `1.22.0`.
    pub version: String,
}

/// `POST /hello` from Collie.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HelloRequest {
    /// Collie's version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub collie: Option<CollieInfo>,
    /// The versions Collie speaks.
    pub wire: WireRange,
}

/// The answer to `POST /hello`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HelloPostResponse {
    /// Always true.
    pub ok: bool,
    /// The versions the agent speaks.
    pub wire: WireRange,
    /// Whether the ranges overlap.
    pub compatible: bool,
}
