//! The page's files, embedded in the binary from `crates/durable-cli/web/`
//! (no build step): [`ASSETS`] is the one list of them.

/// One file of the page.
#[derive(Debug)]
pub(crate) struct Asset {
    /// Its name after `/<secret>/`.
    pub(crate) name: &'static str,
    pub(crate) bytes: &'static [u8],
}

macro_rules! assets {
    ($($name:literal),* $(,)?) => {
        &[$(Asset { name: $name, bytes: include_bytes!(concat!("../../web/", $name)) }),*]
    };
}

/// Every file the page is made of; `index.html` is served at `/<secret>/`.
pub(crate) const ASSETS: &[Asset] = assets!["index.html", "app.js", "app.css"];

/// The file of this name, if the page has one.
pub(crate) fn find(name: &str) -> Option<&'static Asset> {
    ASSETS.iter().find(|a| a.name == name)
}

/// The content type a file's extension says; `None` for one the server
/// does not know (each embedded file has a known one: a test checks).
pub(crate) fn content_type(name: &str) -> Option<&'static str> {
    let ext = name.rsplit_once('.').map(|(_, e)| e)?;
    Some(match ext {
        "html" => "text/html; charset=utf-8",
        "js" | "mjs" => "text/javascript; charset=utf-8",
        "css" => "text/css; charset=utf-8",
        "json" => "application/json",
        "webmanifest" => "application/manifest+json",
        "svg" => "image/svg+xml",
        "png" => "image/png",
        "ico" => "image/x-icon",
        "woff2" => "font/woff2",
        "txt" => "text/plain; charset=utf-8",
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_file_has_a_type_a_plain_name_and_no_route_of_its_own() {
        assert!(find("index.html").is_some(), "the page starts at index.html");
        for asset in ASSETS {
            assert!(content_type(asset.name).is_some(), "{}: no content type", asset.name);
            assert!(
                !asset.name.is_empty()
                    && !asset.name.starts_with('.')
                    && asset.name.bytes().all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b)),
                "{}: a name that needs no encoding",
                asset.name
            );
            assert!(!["about", "wire"].contains(&asset.name), "{}: a route's name", asset.name);
            assert!(!asset.bytes.is_empty(), "{}: empty", asset.name);
        }
        let mut names: Vec<_> = ASSETS.iter().map(|a| a.name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), ASSETS.len(), "a file listed twice");
    }

    #[test]
    fn the_listed_files_are_all_the_folder_holds() {
        // A file added to web/ without a line in ASSETS would never be served.
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("web");
        let mut on_disk: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| !n.starts_with('.'))
            .collect();
        on_disk.sort();
        let mut listed: Vec<String> = ASSETS.iter().map(|a| a.name.to_owned()).collect();
        listed.sort();
        assert_eq!(listed, on_disk);
    }

    #[test]
    fn types_follow_the_extension() {
        assert_eq!(content_type("app.js"), Some("text/javascript; charset=utf-8"));
        assert_eq!(content_type("app.css"), Some("text/css; charset=utf-8"));
        assert_eq!(content_type("index.html"), Some("text/html; charset=utf-8"));
        assert_eq!(content_type("README"), None);
        assert_eq!(content_type("x.exe"), None);
    }
}
