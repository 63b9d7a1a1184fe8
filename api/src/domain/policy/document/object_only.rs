//! Structs from JSON objects only. Serde's derived `Deserialize` also reads
//! a struct from a JSON array, member by position, so without this
//! `["2h", null, null, null, null, null, null, null, null]` would be a policy
//! with a two-hour window, and `{"fingerprint": [["/a"], null, null]}` would
//! include `/a`. Asking the deserializer for a map instead of a struct
//! refuses an array ("invalid type: sequence, expected struct …") and changes
//! nothing else: the visitor, and so every member check and error path, is
//! the same.

use std::fmt;

use serde::de::{Deserialize, Deserializer, Visitor};

/// Wraps a deserializer (or, for `Option`, the visitor that receives the
/// inner one) so that a struct is read only from an object.
pub(super) struct ObjectOnly<T>(pub T);

/// For `#[serde(deserialize_with)]` on a member whose type is a struct (or
/// an `Option` of one).
pub(super) fn object_only<'de, D: Deserializer<'de>, T: Deserialize<'de>>(
    d: D,
) -> Result<T, D::Error> {
    T::deserialize(ObjectOnly(d))
}

impl<'de, D: Deserializer<'de>> Deserializer<'de> for ObjectOnly<D> {
    type Error = D::Error;

    fn deserialize_any<V: Visitor<'de>>(self, v: V) -> Result<V::Value, D::Error> {
        self.0.deserialize_any(v)
    }

    fn deserialize_option<V: Visitor<'de>>(self, v: V) -> Result<V::Value, D::Error> {
        self.0.deserialize_option(ObjectOnly(v))
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _fields: &'static [&'static str],
        v: V,
    ) -> Result<V::Value, D::Error> {
        self.0.deserialize_map(v)
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string
        bytes byte_buf unit unit_struct newtype_struct seq tuple tuple_struct
        map enum identifier ignored_any
    }
}

/// The `Option` visitor, passing the object-only rule on to `Some`.
impl<'de, V: Visitor<'de>> Visitor<'de> for ObjectOnly<V> {
    type Value = V::Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.expecting(f)
    }

    fn visit_none<E: serde::de::Error>(self) -> Result<V::Value, E> {
        self.0.visit_none()
    }

    fn visit_unit<E: serde::de::Error>(self) -> Result<V::Value, E> {
        self.0.visit_unit()
    }

    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<V::Value, D::Error> {
        self.0.visit_some(ObjectOnly(d))
    }
}
