//! Field names of a serde-derived struct, read from its `Deserialize` impl, so
//! that the CSV header and the JSON key checks come from the type itself.

use std::fmt;

use serde::de::{self, Deserialize, Deserializer, Visitor};

#[derive(Debug)]
struct Stop(Option<&'static [&'static str]>);

impl fmt::Display for Stop {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("introspection stop")
    }
}

impl std::error::Error for Stop {}

impl de::Error for Stop {
    fn custom<T: fmt::Display>(_msg: T) -> Self {
        Stop(None)
    }
}

struct Capture;

impl<'de> Deserializer<'de> for Capture {
    type Error = Stop;

    fn deserialize_any<V: Visitor<'de>>(self, _visitor: V) -> Result<V::Value, Stop> {
        Err(Stop(None))
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        fields: &'static [&'static str],
        _visitor: V,
    ) -> Result<V::Value, Stop> {
        Err(Stop(Some(fields)))
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string
        bytes byte_buf option unit unit_struct newtype_struct seq tuple
        tuple_struct map enum identifier ignored_any
    }
}

/// The field names a derived `Deserialize` struct asks for, in declaration
/// order; empty for types that are not plain structs.
pub(crate) fn struct_fields<'de, T: Deserialize<'de>>() -> &'static [&'static str] {
    match T::deserialize(Capture) {
        Err(Stop(Some(fields))) => fields,
        _ => &[],
    }
}
