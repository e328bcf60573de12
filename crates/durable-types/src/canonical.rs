//! Canonical JSON written straight from any `Serialize` value: a `serde`
//! serializer that sorts object keys at every level and, for the ask hash,
//! leaves out `null` fields and some top-level fields. It is the one writer
//! of canonical JSON: [`canonical_json`](crate::canonical_json) and the ask
//! hash of a `Value` go through it, and so does the hash of a typed `Ask`,
//! without building a `serde_json::Value` first.
//!
//! Why typed: going through a `Value` cost more than the hashing itself.
//! Every object became an `IndexMap` (with `preserve_order` each key is
//! SipHashed), every string was copied into it, and then it was all
//! dropped again: about a fifth of an answer's round trip
//! (`docs/benchmarks.md`).
//!
//! A typed value is written as its `serde_json::to_value` would be:
//! - scalars and strings by `serde_json`'s compact writer (an `f32` widened
//!   to `f64` first, as `to_value` does; a non-finite float is `null`);
//! - enums in the shapes `to_value` gives them (`"Variant"`,
//!   `{"Variant": …}`);
//! - an object's entries sorted by key; a key given twice (a flattened
//!   field) keeps its last value, as a map does.
//!
//! Debug builds (the tests, the fuzz targets) check each ask's hash against
//! the hash of its `Value`.

use std::ops::Range;

use serde::ser::{self, Impossible, Serialize};

/// What to leave out while writing.
#[derive(Clone, Copy)]
pub(crate) struct Omit {
    /// Object fields whose value is `null`, at every level.
    pub(crate) nulls: bool,
    /// These keys of the top-level object.
    pub(crate) top: &'static [&'static str],
}

/// The canonical bytes of `v`, with what `omit` says left out.
pub(crate) fn write<T: Serialize + ?Sized>(v: &T, omit: Omit) -> Result<Vec<u8>, Error> {
    let mut out = Vec::with_capacity(256);
    v.serialize(Canonical { out: &mut out, omit })?;
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
    /// What to leave out here (`top` is emptied below the top).
    omit: Omit,
}

impl Canonical<'_> {
    fn scalar<T: Serialize + ?Sized>(self, v: &T) -> Result<(), Error> {
        serde_json::to_writer(&mut *self.out, v).map_err(|e| Error(e.to_string()))
    }
}

impl Omit {
    /// What is left out below the top-level object.
    fn below(self) -> Omit {
        Omit { top: &[], ..self }
    }
}

/// Writes `v`, a value below the top, into a buffer of its own (an
/// object's entry, a variant's data).
fn value_bytes<T: Serialize + ?Sized>(v: &T, omit: Omit) -> Result<Vec<u8>, Error> {
    let mut out = Vec::new();
    v.serialize(Canonical { out: &mut out, omit: omit.below() })?;
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
        let value = value_bytes(v, self.omit)?;
        tagged(self.out, variant, &value)
    }
    fn serialize_seq(self, _: Option<usize>) -> Result<Array<'a>, Error> {
        self.out.push(b'[');
        Ok(Array { out: self.out, omit: self.omit.below(), first: true })
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
        Ok(TaggedArray { parent: self.out, variant, omit: self.omit.below(), items: vec![b'['], first: true })
    }
    fn serialize_map(self, len: Option<usize>) -> Result<Finish<'a>, Error> {
        Ok(Finish { parent: self.out, object: Object::new(self.omit, len.unwrap_or(0)) })
    }
    fn serialize_struct(self, _: &'static str, len: usize) -> Result<Finish<'a>, Error> {
        self.serialize_map(Some(len))
    }
    fn serialize_struct_variant(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
        len: usize,
    ) -> Result<TaggedObject<'a>, Error> {
        Ok(TaggedObject { parent: self.out, variant, object: Object::new(self.omit.below(), len) })
    }
}

/// An array's items, written in order.
struct Array<'a> {
    out: &'a mut Vec<u8>,
    omit: Omit,
    first: bool,
}

impl Array<'_> {
    fn item<T: Serialize + ?Sized>(&mut self, v: &T) -> Result<(), Error> {
        if !std::mem::take(&mut self.first) {
            self.out.push(b',');
        }
        v.serialize(Canonical { out: self.out, omit: self.omit })
    }
}

/// A sequence, a tuple and a tuple struct are all an array.
macro_rules! array_of {
    ($($trait:ident :: $method:ident),*) => {$(
        impl ser::$trait for Array<'_> {
            type Ok = ();
            type Error = Error;
            fn $method<T: Serialize + ?Sized>(&mut self, v: &T) -> Result<(), Error> {
                self.item(v)
            }
            fn end(self) -> Result<(), Error> {
                self.out.push(b']');
                Ok(())
            }
        }
    )*};
}

array_of!(
    SerializeSeq::serialize_element,
    SerializeTuple::serialize_element,
    SerializeTupleStruct::serialize_field
);

/// `{"variant": [items]}`.
struct TaggedArray<'a> {
    parent: &'a mut Vec<u8>,
    variant: &'static str,
    omit: Omit,
    items: Vec<u8>,
    first: bool,
}

impl ser::SerializeTupleVariant for TaggedArray<'_> {
    type Ok = ();
    type Error = Error;
    fn serialize_field<T: Serialize + ?Sized>(&mut self, v: &T) -> Result<(), Error> {
        Array { out: &mut self.items, omit: self.omit, first: std::mem::take(&mut self.first) }.item(v)
    }
    fn end(mut self) -> Result<(), Error> {
        self.items.push(b']');
        tagged(self.parent, self.variant, &self.items)
    }
}

/// An object's entries, kept until its end, then sorted. Every key (its
/// text, unescaped) and every value (canonical JSON) is written into one
/// buffer of the object's, and an entry holds their ranges: no key and no
/// value gets an allocation of its own.
struct Object {
    /// Each entry's key and value, as ranges of `bytes`.
    entries: Vec<(Range<usize>, Range<usize>)>,
    bytes: Vec<u8>,
    omit: Omit,
    /// A key given by `serialize_key`, waiting for its value: its range.
    key: Option<Range<usize>>,
}

impl Object {
    /// An object of about `len` entries (as its `Serialize` says): its
    /// entries, and its keys and values at about 32 bytes each, are sized
    /// once rather than grown by doubling from nothing (six allocations for
    /// an ask's 300 bytes). Only a hint: capped, so that a `Serialize` that
    /// claims too much reserves little.
    fn new(omit: Omit, len: usize) -> Object {
        let len = len.min(32);
        Object { entries: Vec::with_capacity(len), bytes: Vec::with_capacity(len * 32), omit, key: None }
    }

    /// A struct's field.
    fn field<T: Serialize + ?Sized>(&mut self, key: &'static str, v: &T) -> Result<(), Error> {
        if self.omit.top.contains(&key) {
            return Ok(());
        }
        let start = self.bytes.len();
        self.bytes.extend_from_slice(key.as_bytes());
        self.entry(start..self.bytes.len(), v)
    }

    /// The value of the key already written at `key`.
    fn entry<T: Serialize + ?Sized>(&mut self, key: Range<usize>, v: &T) -> Result<(), Error> {
        let top = self.omit.top.iter().any(|t| t.as_bytes() == &self.bytes[key.clone()]);
        if top {
            self.bytes.truncate(key.start);
            return Ok(());
        }
        let start = self.bytes.len();
        v.serialize(Canonical { out: &mut self.bytes, omit: self.omit.below() })?;
        if self.omit.nulls && &self.bytes[start..] == b"null" {
            self.bytes.truncate(key.start);
        } else {
            self.entries.push((key, start..self.bytes.len()));
        }
        Ok(())
    }

    fn write_into(self, out: &mut Vec<u8>) {
        let Object { mut entries, bytes, .. } = self;
        // By the keys' UTF-8 bytes, which is their `str` order. Stable: of
        // a key given twice, the last stays last, and is kept.
        entries.sort_by(|a, b| bytes[a.0.clone()].cmp(&bytes[b.0.clone()]));
        entries.reverse();
        entries.dedup_by(|later, earlier| bytes[later.0.clone()] == bytes[earlier.0.clone()]);
        entries.reverse();
        out.reserve(bytes.len() + entries.len() * 4 + 2);
        out.push(b'{');
        for (i, (key, value)) in entries.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            // Written from `str`s only (`KeyText`), so always UTF-8.
            let key = std::str::from_utf8(&bytes[key.clone()]).unwrap_or_default();
            let _ = serde_json::to_writer(&mut *out, key);
            out.push(b':');
            out.extend_from_slice(&bytes[value.clone()]);
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
        let start = self.object.bytes.len();
        key.serialize(KeyText(&mut self.object.bytes))?;
        self.object.key = Some(start..self.object.bytes.len());
        Ok(())
    }
    fn serialize_value<T: Serialize + ?Sized>(&mut self, v: &T) -> Result<(), Error> {
        let key = self.object.key.take().ok_or_else(|| Error("a map value came without its key".into()))?;
        self.object.entry(key, v)
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
        self.object.field(key, v)
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
        self.object.field(key, v)
    }
    fn end(self) -> Result<(), Error> {
        let mut inner = Vec::new();
        self.object.write_into(&mut inner);
        tagged(self.parent, self.variant, &inner)
    }
}

/// A map key as a `Value` keeps it: a string, or a number or a bool
/// written as text; written (unescaped) at the end of its object's buffer.
struct KeyText<'a>(&'a mut Vec<u8>);

impl KeyText<'_> {
    fn text(self, v: impl std::fmt::Display) -> Result<(), Error> {
        use std::io::Write;
        write!(self.0, "{v}").map_err(|e| Error(e.to_string()))
    }
}

impl ser::Serializer for KeyText<'_> {
    type Ok = ();
    type Error = Error;
    type SerializeSeq = Impossible<(), Error>;
    type SerializeTuple = Impossible<(), Error>;
    type SerializeTupleStruct = Impossible<(), Error>;
    type SerializeTupleVariant = Impossible<(), Error>;
    type SerializeMap = Impossible<(), Error>;
    type SerializeStruct = Impossible<(), Error>;
    type SerializeStructVariant = Impossible<(), Error>;

    fn serialize_bool(self, v: bool) -> Result<(), Error> {
        self.text(v)
    }
    fn serialize_i8(self, v: i8) -> Result<(), Error> {
        self.text(v)
    }
    fn serialize_i16(self, v: i16) -> Result<(), Error> {
        self.text(v)
    }
    fn serialize_i32(self, v: i32) -> Result<(), Error> {
        self.text(v)
    }
    fn serialize_i64(self, v: i64) -> Result<(), Error> {
        self.text(v)
    }
    fn serialize_u8(self, v: u8) -> Result<(), Error> {
        self.text(v)
    }
    fn serialize_u16(self, v: u16) -> Result<(), Error> {
        self.text(v)
    }
    fn serialize_u32(self, v: u32) -> Result<(), Error> {
        self.text(v)
    }
    fn serialize_u64(self, v: u64) -> Result<(), Error> {
        self.text(v)
    }
    fn serialize_f32(self, _: f32) -> Result<(), Error> {
        Err(key_must_be_a_string())
    }
    fn serialize_f64(self, _: f64) -> Result<(), Error> {
        Err(key_must_be_a_string())
    }
    fn serialize_char(self, v: char) -> Result<(), Error> {
        self.text(v)
    }
    fn serialize_str(self, v: &str) -> Result<(), Error> {
        self.0.extend_from_slice(v.as_bytes());
        Ok(())
    }
    fn serialize_bytes(self, _: &[u8]) -> Result<(), Error> {
        Err(key_must_be_a_string())
    }
    fn serialize_none(self) -> Result<(), Error> {
        Err(key_must_be_a_string())
    }
    fn serialize_some<T: Serialize + ?Sized>(self, _: &T) -> Result<(), Error> {
        Err(key_must_be_a_string())
    }
    fn serialize_unit(self) -> Result<(), Error> {
        Err(key_must_be_a_string())
    }
    fn serialize_unit_struct(self, _: &'static str) -> Result<(), Error> {
        Err(key_must_be_a_string())
    }
    fn serialize_unit_variant(self, _: &'static str, _: u32, variant: &'static str) -> Result<(), Error> {
        self.serialize_str(variant)
    }
    fn serialize_newtype_struct<T: Serialize + ?Sized>(self, _: &'static str, v: &T) -> Result<(), Error> {
        v.serialize(self)
    }
    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: &T,
    ) -> Result<(), Error> {
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

    use serde::Serialize;
    use serde_json::{Map, Value};

    use super::{Omit, write};
    use crate::hash::ASK_HASH_EXCLUDED;

    const HASH: Omit = Omit { nulls: true, top: &ASK_HASH_EXCLUDED };

    /// Without this writer: the value's `to_value`, its `null` fields and
    /// excluded top-level fields removed and its keys sorted by hand, then
    /// serde_json's own compact writer.
    fn through_value<T: Serialize>(v: &T) -> String {
        fn sorted(v: Value, top: &[&str]) -> Value {
            match v {
                Value::Object(map) => {
                    let mut entries: Vec<_> = map
                        .into_iter()
                        .filter(|(k, v)| !v.is_null() && !top.contains(&k.as_str()))
                        .map(|(k, v)| (k, sorted(v, &[])))
                        .collect();
                    entries.sort_by(|a, b| a.0.cmp(&b.0));
                    Value::Object(entries.into_iter().collect::<Map<_, _>>())
                }
                Value::Array(items) => Value::Array(items.into_iter().map(|v| sorted(v, &[])).collect()),
                other => other,
            }
        }
        serde_json::to_string(&sorted(serde_json::to_value(v).unwrap(), &ASK_HASH_EXCLUDED)).unwrap()
    }

    fn typed<T: Serialize>(v: &T) -> String {
        String::from_utf8(write(v, HASH).unwrap()).unwrap()
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

    #[test]
    fn map_keys_are_sorted_by_their_text_and_escaped_when_written() {
        // Keys kept unescaped in the object's buffer: sorted by their own
        // bytes (`"A"` < `"a\"b"` < `"z"` < `"é"`), escaped on the way out.
        let v = serde_json::json!({
            "é": 1, "z": {"b": 2, "a\u{1}": null, "\n": [3]}, "a\"b": 4, "A": 5, "id": "dropped"
        });
        let text = typed(&v);
        assert_eq!(text, through_value(&v));
        assert_eq!(text, r#"{"A":5,"a\"b":4,"z":{"\n":[3],"b":2},"é":1}"#);
    }

    #[test]
    fn keys_are_in_code_point_order_not_utf_16_order() {
        // U+FF61 before U+1F600 by code point (and UTF-8 bytes); UTF-16
        // would put the surrogate pair (0xD83D…) first (docs/wire.md §7).
        let v = serde_json::json!({"\u{1F600}": 1, "\u{FF61}": 2});
        let text = typed(&v);
        assert_eq!(text, through_value(&v));
        assert_eq!(text, "{\"\u{FF61}\":2,\"\u{1F600}\":1}");
    }
}
