//! The ask hash's input written straight from a typed value: a `serde`
//! serializer that writes canonical JSON (keys sorted at every level,
//! `null` fields left out, some top-level fields skipped) without building a
//! `serde_json::Value` first.
//!
//! Why: going through a `Value` cost more than the hashing itself. Every
//! object became an `IndexMap` (with `preserve_order` each key is
//! SipHashed), every string was copied into it, and then it was all
//! dropped again: about a fifth of an answer's round trip
//! (`docs/benchmarks.md`).
//!
//! The bytes are the same as [`ask_hash_input`](crate::ask_hash_input) of the
//! value's `serde_json::to_value`, by construction:
//! - scalars and strings are written by `serde_json`'s compact writer, as
//!   a `Value` would write them (an `f32` is widened to `f64` first, as
//!   `to_value` does; a non-finite float is `null`);
//! - enums take the shapes `to_value` gives them (`"Variant"`,
//!   `{"Variant": …}`);
//! - an object's entries are sorted by key (a key given twice keeps its
//!   last value, as a map does), and an entry whose value is `null` is left
//!   out.
//!
//! Debug builds (the tests, the fuzz targets) check each hash against the
//! `Value` path as well.

use std::borrow::Cow;

use serde::ser::{self, Impossible, Serialize};

/// The canonical bytes of `v`, `null` fields left out at every level and
/// the keys in `skip` left out of the top-level object.
pub(crate) fn hash_input<T: Serialize + ?Sized>(
    v: &T,
    skip: &'static [&'static str],
) -> Result<Vec<u8>, Error> {
    let mut out = Vec::with_capacity(256);
    v.serialize(Canonical { out: &mut out, skip })?;
    Ok(out)
}

/// Why a value could not be written: a map key that is not a string or a
/// number, or the value's own `Serialize` failing.
#[derive(Debug)]
pub(crate) struct Error(String);

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Error {}

impl ser::Error for Error {
    fn custom<T: std::fmt::Display>(msg: T) -> Self {
        Error(msg.to_string())
    }
}

/// Writes one value into `out`.
struct Canonical<'a> {
    out: &'a mut Vec<u8>,
    /// Top-level keys to leave out; empty below the top.
    skip: &'static [&'static str],
}

impl Canonical<'_> {
    fn scalar<T: Serialize + ?Sized>(self, v: &T) -> Result<(), Error> {
        serde_json::to_writer(&mut *self.out, v).map_err(|e| Error(e.to_string()))
    }
}

/// Writes `v` into a buffer of its own (an object's entry).
fn value_bytes<T: Serialize + ?Sized>(v: &T) -> Result<Vec<u8>, Error> {
    let mut out = Vec::new();
    v.serialize(Canonical { out: &mut out, skip: &[] })?;
    Ok(out)
}

/// `{"variant": <value>}`, as `to_value` writes a variant that carries data.
fn tagged(out: &mut Vec<u8>, variant: &str, value: &[u8]) -> Result<(), Error> {
    out.push(b'{');
    serde_json::to_writer(&mut *out, variant).map_err(|e| Error(e.to_string()))?;
    out.push(b':');
    out.extend_from_slice(value);
    out.push(b'}');
    Ok(())
}

impl<'a> ser::Serializer for Canonical<'a> {
    type Ok = ();
    type Error = Error;
    type SerializeSeq = Array<'a>;
    type SerializeTuple = Array<'a>;
    type SerializeTupleStruct = Array<'a>;
    type SerializeTupleVariant = TaggedArray<'a>;
    type SerializeMap = Finish<'a>;
    type SerializeStruct = Finish<'a>;
    type SerializeStructVariant = TaggedObject<'a>;

    fn serialize_bool(self, v: bool) -> Result<(), Error> {
        self.scalar(&v)
    }
    fn serialize_i8(self, v: i8) -> Result<(), Error> {
        self.scalar(&v)
    }
    fn serialize_i16(self, v: i16) -> Result<(), Error> {
        self.scalar(&v)
    }
    fn serialize_i32(self, v: i32) -> Result<(), Error> {
        self.scalar(&v)
    }
    fn serialize_i64(self, v: i64) -> Result<(), Error> {
        self.scalar(&v)
    }
    fn serialize_i128(self, v: i128) -> Result<(), Error> {
        self.scalar(&v)
    }
    fn serialize_u8(self, v: u8) -> Result<(), Error> {
        self.scalar(&v)
    }
    fn serialize_u16(self, v: u16) -> Result<(), Error> {
        self.scalar(&v)
    }
    fn serialize_u32(self, v: u32) -> Result<(), Error> {
        self.scalar(&v)
    }
    fn serialize_u64(self, v: u64) -> Result<(), Error> {
        self.scalar(&v)
    }
    fn serialize_u128(self, v: u128) -> Result<(), Error> {
        self.scalar(&v)
    }
    fn serialize_f32(self, v: f32) -> Result<(), Error> {
        // `to_value` widens an f32 before it keeps it.
        self.serialize_f64(f64::from(v))
    }
    fn serialize_f64(self, v: f64) -> Result<(), Error> {
        // serde_json writes a non-finite float as `null`, as a `Value` has it.
        self.scalar(&v)
    }
    fn serialize_char(self, v: char) -> Result<(), Error> {
        self.scalar(&v)
    }
    fn serialize_str(self, v: &str) -> Result<(), Error> {
        self.scalar(v)
    }
    fn serialize_bytes(self, v: &[u8]) -> Result<(), Error> {
        // `to_value` makes bytes an array of numbers.
        self.scalar(v)
    }
    fn serialize_none(self) -> Result<(), Error> {
        self.scalar(&())
    }
    fn serialize_some<T: Serialize + ?Sized>(self, v: &T) -> Result<(), Error> {
        v.serialize(self)
    }
    fn serialize_unit(self) -> Result<(), Error> {
        self.scalar(&())
    }
    fn serialize_unit_struct(self, _: &'static str) -> Result<(), Error> {
        self.scalar(&())
    }
    fn serialize_unit_variant(self, _: &'static str, _: u32, variant: &'static str) -> Result<(), Error> {
        self.scalar(variant)
    }
    fn serialize_newtype_struct<T: Serialize + ?Sized>(self, _: &'static str, v: &T) -> Result<(), Error> {
        v.serialize(self)
    }
    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
        v: &T,
    ) -> Result<(), Error> {
        let value = value_bytes(v)?;
        tagged(self.out, variant, &value)
    }
    fn serialize_seq(self, _: Option<usize>) -> Result<Array<'a>, Error> {
        self.out.push(b'[');
        Ok(Array { out: self.out, first: true })
    }
    fn serialize_tuple(self, len: usize) -> Result<Array<'a>, Error> {
        self.serialize_seq(Some(len))
    }
    fn serialize_tuple_struct(self, _: &'static str, len: usize) -> Result<Array<'a>, Error> {
        self.serialize_seq(Some(len))
    }
    fn serialize_tuple_variant(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
        _: usize,
    ) -> Result<TaggedArray<'a>, Error> {
        Ok(TaggedArray { parent: self.out, variant, items: vec![b'['], first: true })
    }
    fn serialize_map(self, _: Option<usize>) -> Result<Finish<'a>, Error> {
        Ok(Finish { parent: self.out, object: Object::new(self.skip) })
    }
    fn serialize_struct(self, _: &'static str, len: usize) -> Result<Finish<'a>, Error> {
        self.serialize_map(Some(len))
    }
    fn serialize_struct_variant(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
        _: usize,
    ) -> Result<TaggedObject<'a>, Error> {
        Ok(TaggedObject { parent: self.out, variant, object: Object::new(&[]) })
    }
}

/// An array's items, written in order.
struct Array<'a> {
    out: &'a mut Vec<u8>,
    first: bool,
}

impl Array<'_> {
    fn item<T: Serialize + ?Sized>(&mut self, v: &T) -> Result<(), Error> {
        if !std::mem::take(&mut self.first) {
            self.out.push(b',');
        }
        v.serialize(Canonical { out: self.out, skip: &[] })
    }

    fn close(self) {
        self.out.push(b']');
    }
}

impl ser::SerializeSeq for Array<'_> {
    type Ok = ();
    type Error = Error;
    fn serialize_element<T: Serialize + ?Sized>(&mut self, v: &T) -> Result<(), Error> {
        self.item(v)
    }
    fn end(self) -> Result<(), Error> {
        self.close();
        Ok(())
    }
}

impl ser::SerializeTuple for Array<'_> {
    type Ok = ();
    type Error = Error;
    fn serialize_element<T: Serialize + ?Sized>(&mut self, v: &T) -> Result<(), Error> {
        self.item(v)
    }
    fn end(self) -> Result<(), Error> {
        self.close();
        Ok(())
    }
}

impl ser::SerializeTupleStruct for Array<'_> {
    type Ok = ();
    type Error = Error;
    fn serialize_field<T: Serialize + ?Sized>(&mut self, v: &T) -> Result<(), Error> {
        self.item(v)
    }
    fn end(self) -> Result<(), Error> {
        self.close();
        Ok(())
    }
}

/// `{"variant": [items]}`.
struct TaggedArray<'a> {
    parent: &'a mut Vec<u8>,
    variant: &'static str,
    items: Vec<u8>,
    first: bool,
}

impl ser::SerializeTupleVariant for TaggedArray<'_> {
    type Ok = ();
    type Error = Error;
    fn serialize_field<T: Serialize + ?Sized>(&mut self, v: &T) -> Result<(), Error> {
        Array { out: &mut self.items, first: std::mem::take(&mut self.first) }.item(v)
    }
    fn end(mut self) -> Result<(), Error> {
        self.items.push(b']');
        tagged(self.parent, self.variant, &self.items)
    }
}

/// An object's entries, kept until its end, then sorted.
struct Object {
    entries: Vec<(Cow<'static, str>, Vec<u8>)>,
    skip: &'static [&'static str],
    /// A key given by `serialize_key`, waiting for its value.
    key: Option<String>,
}

impl Object {
    fn new(skip: &'static [&'static str]) -> Object {
        Object { entries: Vec::new(), skip, key: None }
    }

    fn entry<T: Serialize + ?Sized>(&mut self, key: Cow<'static, str>, v: &T) -> Result<(), Error> {
        if self.skip.contains(&&*key) {
            return Ok(());
        }
        let value = value_bytes(v)?;
        // A `null` field is left out of the hash input.
        if value != b"null" {
            self.entries.push((key, value));
        }
        Ok(())
    }

    fn write_into(mut self, out: &mut Vec<u8>) {
        // Stable: of a key given twice, the last stays last, and is kept.
        self.entries.sort_by(|a, b| a.0.cmp(&b.0));
        self.entries.reverse();
        self.entries.dedup_by(|later, earlier| later.0 == earlier.0);
        self.entries.reverse();
        out.push(b'{');
        for (i, (k, v)) in self.entries.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            let _ = serde_json::to_writer(&mut *out, &**k);
            out.push(b':');
            out.extend_from_slice(v);
        }
        out.push(b'}');
    }
}

/// A map or a struct, written into its parent at its end.
struct Finish<'a> {
    parent: &'a mut Vec<u8>,
    object: Object,
}

impl ser::SerializeMap for Finish<'_> {
    type Ok = ();
    type Error = Error;
    fn serialize_key<T: Serialize + ?Sized>(&mut self, key: &T) -> Result<(), Error> {
        self.object.key = Some(key.serialize(KeyText)?);
        Ok(())
    }
    fn serialize_value<T: Serialize + ?Sized>(&mut self, v: &T) -> Result<(), Error> {
        let key = self.object.key.take().ok_or_else(|| Error("a map value came without its key".into()))?;
        self.object.entry(key.into(), v)
    }
    fn end(self) -> Result<(), Error> {
        self.object.write_into(self.parent);
        Ok(())
    }
}

impl ser::SerializeStruct for Finish<'_> {
    type Ok = ();
    type Error = Error;
    fn serialize_field<T: Serialize + ?Sized>(&mut self, key: &'static str, v: &T) -> Result<(), Error> {
        self.object.entry(key.into(), v)
    }
    fn end(self) -> Result<(), Error> {
        self.object.write_into(self.parent);
        Ok(())
    }
}

/// `{"variant": {fields}}`.
struct TaggedObject<'a> {
    parent: &'a mut Vec<u8>,
    variant: &'static str,
    object: Object,
}

impl ser::SerializeStructVariant for TaggedObject<'_> {
    type Ok = ();
    type Error = Error;
    fn serialize_field<T: Serialize + ?Sized>(&mut self, key: &'static str, v: &T) -> Result<(), Error> {
        self.object.entry(key.into(), v)
    }
    fn end(self) -> Result<(), Error> {
        let mut inner = Vec::new();
        self.object.write_into(&mut inner);
        tagged(self.parent, self.variant, &inner)
    }
}

/// A map key as a `Value` keeps it: a string, or a number or a bool
/// written as text.
struct KeyText;

impl ser::Serializer for KeyText {
    type Ok = String;
    type Error = Error;
    type SerializeSeq = Impossible<String, Error>;
    type SerializeTuple = Impossible<String, Error>;
    type SerializeTupleStruct = Impossible<String, Error>;
    type SerializeTupleVariant = Impossible<String, Error>;
    type SerializeMap = Impossible<String, Error>;
    type SerializeStruct = Impossible<String, Error>;
    type SerializeStructVariant = Impossible<String, Error>;

    fn serialize_bool(self, v: bool) -> Result<String, Error> {
        Ok(v.to_string())
    }
    fn serialize_i8(self, v: i8) -> Result<String, Error> {
        Ok(v.to_string())
    }
    fn serialize_i16(self, v: i16) -> Result<String, Error> {
        Ok(v.to_string())
    }
    fn serialize_i32(self, v: i32) -> Result<String, Error> {
        Ok(v.to_string())
    }
    fn serialize_i64(self, v: i64) -> Result<String, Error> {
        Ok(v.to_string())
    }
    fn serialize_u8(self, v: u8) -> Result<String, Error> {
        Ok(v.to_string())
    }
    fn serialize_u16(self, v: u16) -> Result<String, Error> {
        Ok(v.to_string())
    }
    fn serialize_u32(self, v: u32) -> Result<String, Error> {
        Ok(v.to_string())
    }
    fn serialize_u64(self, v: u64) -> Result<String, Error> {
        Ok(v.to_string())
    }
    fn serialize_f32(self, _: f32) -> Result<String, Error> {
        Err(key_must_be_a_string())
    }
    fn serialize_f64(self, _: f64) -> Result<String, Error> {
        Err(key_must_be_a_string())
    }
    fn serialize_char(self, v: char) -> Result<String, Error> {
        Ok(v.to_string())
    }
    fn serialize_str(self, v: &str) -> Result<String, Error> {
        Ok(v.to_owned())
    }
    fn serialize_bytes(self, _: &[u8]) -> Result<String, Error> {
        Err(key_must_be_a_string())
    }
    fn serialize_none(self) -> Result<String, Error> {
        Err(key_must_be_a_string())
    }
    fn serialize_some<T: Serialize + ?Sized>(self, _: &T) -> Result<String, Error> {
        Err(key_must_be_a_string())
    }
    fn serialize_unit(self) -> Result<String, Error> {
        Err(key_must_be_a_string())
    }
    fn serialize_unit_struct(self, _: &'static str) -> Result<String, Error> {
        Err(key_must_be_a_string())
    }
    fn serialize_unit_variant(self, _: &'static str, _: u32, variant: &'static str) -> Result<String, Error> {
        Ok(variant.to_owned())
    }
    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        v: &T,
    ) -> Result<String, Error> {
        v.serialize(self)
    }
    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: &T,
    ) -> Result<String, Error> {
        Err(key_must_be_a_string())
    }
    fn serialize_seq(self, _: Option<usize>) -> Result<Self::SerializeSeq, Error> {
        Err(key_must_be_a_string())
    }
    fn serialize_tuple(self, _: usize) -> Result<Self::SerializeTuple, Error> {
        Err(key_must_be_a_string())
    }
    fn serialize_tuple_struct(self, _: &'static str, _: usize) -> Result<Self::SerializeTupleStruct, Error> {
        Err(key_must_be_a_string())
    }
    fn serialize_tuple_variant(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: usize,
    ) -> Result<Self::SerializeTupleVariant, Error> {
        Err(key_must_be_a_string())
    }
    fn serialize_map(self, _: Option<usize>) -> Result<Self::SerializeMap, Error> {
        Err(key_must_be_a_string())
    }
    fn serialize_struct(self, _: &'static str, _: usize) -> Result<Self::SerializeStruct, Error> {
        Err(key_must_be_a_string())
    }
    fn serialize_struct_variant(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: usize,
    ) -> Result<Self::SerializeStructVariant, Error> {
        Err(key_must_be_a_string())
    }
}

fn key_must_be_a_string() -> Error {
    Error("a map key must be a string or a number".into())
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use proptest::prelude::*;
    use serde::Serialize;
    use serde_json::Value;

    use super::hash_input;
    use crate::hash::{ASK_HASH_EXCLUDED, ask_hash_input};

    /// The `Value` path this writer stands in for.
    fn through_value<T: Serialize>(v: &T) -> String {
        ask_hash_input(&serde_json::to_value(v).unwrap())
    }

    fn typed<T: Serialize>(v: &T) -> String {
        String::from_utf8(hash_input(v, &ASK_HASH_EXCLUDED).unwrap()).unwrap()
    }

    #[derive(Serialize)]
    #[serde(rename_all = "camelCase")]
    struct Shapes {
        id: &'static str,
        zeta: u8,
        alpha_beta: Option<i32>,
        gone: Option<u8>,
        unit: (),
        float: f32,
        wide: f64,
        nan: f64,
        letter: char,
        bytes: &'static [u8],
        kinds: Vec<Kind>,
        by_number: BTreeMap<u32, &'static str>,
        nested: Nested,
        #[serde(flatten)]
        flat: Flat,
    }

    #[derive(Serialize)]
    enum Kind {
        Plain,
        Wrapped(u8),
        Pair(u8, Option<u8>),
        Named { b: u8, a: Option<u8> },
    }

    #[derive(Serialize)]
    #[serde(rename_all = "camelCase")]
    struct Nested {
        id: &'static str,
        created_at: Option<&'static str>,
        z: Vec<Option<u8>>,
    }

    #[derive(Serialize)]
    #[serde(tag = "kind", rename_all = "lowercase")]
    enum Flat {
        Choice { options: Vec<&'static str>, zeta: u8 },
    }

    #[test]
    fn every_serde_shape_is_written_as_the_value_path_writes_it() {
        let v = Shapes {
            id: "dropped at the top",
            zeta: 1,
            alpha_beta: Some(-3),
            gone: None,
            unit: (),
            float: 0.1,
            wide: 1e300,
            nan: f64::NAN,
            letter: 'é',
            bytes: b"\x00\xff",
            kinds: vec![Kind::Plain, Kind::Wrapped(2), Kind::Pair(3, None), Kind::Named { b: 4, a: None }],
            by_number: BTreeMap::from([(10, "ten"), (9, "nine")]),
            nested: Nested { id: "kept below the top", created_at: None, z: vec![None, Some(1)] },
            // `zeta` twice: the flattened one comes last and is kept.
            flat: Flat::Choice { options: vec!["yes", "no"], zeta: 9 },
        };
        let text = typed(&v);
        assert_eq!(text, through_value(&v));
        assert!(!text.contains("dropped at the top") && text.contains("kept below the top"), "{text}");
        assert!(text.contains("\"zeta\":9") && !text.contains("\"zeta\":1"), "{text}");
    }

    fn json_value() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(Value::from),
            any::<u64>().prop_map(Value::from),
            any::<f64>().prop_map(Value::from),
            ".{0,8}".prop_map(Value::String),
        ];
        leaf.prop_recursive(4, 48, 6, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
                prop::collection::vec(
                    (prop_oneof!["[a-z]{1,3}", ".{0,4}", Just("id".to_owned())], inner),
                    0..6
                )
                .prop_map(|entries| Value::Object(entries.into_iter().collect())),
            ]
        })
    }

    proptest! {
        #[test]
        fn any_json_value_is_written_as_the_value_path_writes_it(v in json_value()) {
            prop_assert_eq!(typed(&v), through_value(&v));
        }
    }
}
