//! Reading the subject's common name and organizations out of a DER certificate, which is all
//! an x509 identity needs: CN is the user, each O a group.

/// The parts of a certificate's subject that make up an identity.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Subject {
    /// The first CN attribute, if any.
    pub common_name: Option<String>,
    /// Every O attribute, in certificate order.
    pub organizations: Vec<String>,
}

const SEQUENCE: u8 = 0x30;
const SET: u8 = 0x31;
const OID: u8 = 0x06;
const EXPLICIT_0: u8 = 0xa0;
const OID_COMMON_NAME: &[u8] = &[0x55, 0x04, 0x03];
const OID_ORGANIZATION: &[u8] = &[0x55, 0x04, 0x0a];

/// Splits one DER element off the front of `input`: its tag, its contents and what follows.
fn element(input: &[u8]) -> Option<(u8, &[u8], &[u8])> {
    let (&tag, rest) = input.split_first()?;
    let (&first, rest) = rest.split_first()?;
    let (len, rest) = if first < 0x80 {
        (usize::from(first), rest)
    } else {
        let n = usize::from(first & 0x7f);
        if n == 0 || n > 4 || rest.len() < n {
            return None;
        }
        let len = rest[..n]
            .iter()
            .fold(0usize, |acc, b| (acc << 8) | usize::from(*b));
        (len, &rest[n..])
    };
    if rest.len() < len {
        return None;
    }
    Some((tag, &rest[..len], &rest[len..]))
}

/// The contents of the element at the front of `input` when it has `tag`.
fn expect(input: &[u8], tag: u8) -> Option<(&[u8], &[u8])> {
    let (t, contents, rest) = element(input)?;
    (t == tag).then_some((contents, rest))
}

/// A directory string's text: UTF8String, PrintableString, IA5String, or BMPString.
fn text(tag: u8, value: &[u8]) -> Option<String> {
    match tag {
        0x0c | 0x13 | 0x16 => std::str::from_utf8(value).ok().map(str::to_string),
        0x1e if value.len().is_multiple_of(2) => {
            let units: Vec<u16> = value
                .chunks_exact(2)
                .map(|c| u16::from_be_bytes([c[0], c[1]]))
                .collect();
            String::from_utf16(&units).ok()
        }
        _ => None,
    }
}

/// The subject of the DER certificate `der`; None when it is not a well-formed certificate.
pub fn subject(der: &[u8]) -> Option<Subject> {
    let (cert, _) = expect(der, SEQUENCE)?;
    let (tbs, _) = expect(cert, SEQUENCE)?;
    let mut rest = tbs;
    if let Some((EXPLICIT_0, _, after)) = element(rest) {
        rest = after;
    }
    // serialNumber, signature, issuer, validity; then the subject.
    for _ in 0..4 {
        rest = element(rest)?.2;
    }
    let (mut name, _) = expect(rest, SEQUENCE)?;
    let mut out = Subject::default();
    while !name.is_empty() {
        let (mut rdn, after) = expect(name, SET)?;
        name = after;
        while !rdn.is_empty() {
            let (attribute, after) = expect(rdn, SEQUENCE)?;
            rdn = after;
            let (oid, value) = expect(attribute, OID)?;
            let (tag, value, _) = element(value)?;
            let Some(value) = text(tag, value) else {
                continue;
            };
            if oid == OID_COMMON_NAME && out.common_name.is_none() {
                out.common_name = Some(value);
            } else if oid == OID_ORGANIZATION {
                out.organizations.push(value);
            }
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// DER of one element.
    fn der(tag: u8, contents: &[u8]) -> Vec<u8> {
        let mut out = vec![tag];
        if contents.len() < 0x80 {
            out.push(contents.len() as u8);
        } else {
            let len = (contents.len() as u32).to_be_bytes();
            let skip = len.iter().take_while(|b| **b == 0).count();
            out.push(0x80 | (4 - skip) as u8);
            out.extend_from_slice(&len[skip..]);
        }
        out.extend_from_slice(contents);
        out
    }

    fn attribute(oid: &[u8], tag: u8, value: &[u8]) -> Vec<u8> {
        der(
            SET,
            &der(SEQUENCE, &[der(OID, oid), der(tag, value)].concat()),
        )
    }

    fn certificate(subject: &[u8], with_version: bool) -> Vec<u8> {
        let mut tbs = Vec::new();
        if with_version {
            tbs.extend(der(EXPLICIT_0, &der(0x02, &[2])));
        }
        tbs.extend(der(0x02, &[1]));
        tbs.extend(der(SEQUENCE, &der(OID, &[0x2a, 0x86, 0x48])));
        tbs.extend(der(SEQUENCE, &attribute(OID_COMMON_NAME, 0x0c, b"ca")));
        tbs.extend(der(SEQUENCE, &[der(0x17, b"x"), der(0x17, b"y")].concat()));
        tbs.extend(der(SEQUENCE, subject));
        tbs.extend(der(SEQUENCE, &[0u8; 200]));
        der(SEQUENCE, &[der(SEQUENCE, &tbs), der(0x03, &[0])].concat())
    }

    #[test]
    fn common_name_and_every_organization() {
        let subject = [
            attribute(OID_ORGANIZATION, 0x13, b"system:nodes"),
            attribute(OID_COMMON_NAME, 0x0c, b"system:node:a"),
            attribute(OID_ORGANIZATION, 0x1e, &[0, b'g', 0, b'2']),
            attribute(&[0x55, 0x04, 0x06], 0x13, b"DE"),
        ]
        .concat();
        for with_version in [true, false] {
            let got = super::subject(&certificate(&subject, with_version)).unwrap();
            assert_eq!(got.common_name.as_deref(), Some("system:node:a"));
            assert_eq!(got.organizations, ["system:nodes", "g2"]);
        }
    }

    #[test]
    fn truncated_or_foreign_input_is_none() {
        let cert = certificate(&attribute(OID_COMMON_NAME, 0x0c, b"u"), true);
        for cut in [0, 1, 5, cert.len() / 2, cert.len() - 1] {
            assert_eq!(super::subject(&cert[..cut]), None, "cut at {cut}");
        }
        assert_eq!(super::subject(b"-----BEGIN CERTIFICATE-----"), None);
    }
}
