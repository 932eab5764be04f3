//! Tests of `ConfinedDir`: file paths, and opens in place.

use super::*;
use std::io::Read;

fn read_all(mut f: File) -> String {
    let mut s = String::new();
    f.read_to_string(&mut s).unwrap();
    s
}

#[test]
fn file_paths_are_those_local_file_system_makes() {
    let root = tempfile::tempdir().unwrap();
    let dir = ConfinedDir::new(root.path()).unwrap();
    let keys = [
        "a",
        "a/b/c.json",
        "x/.zarray",
        "c/0/0",
        "with space/and%percent/%2e%2E/%25",
        "q?u#e=r&y;[]{}<>|^`\"'~!$*()+,:@",
        "unicode/\u{e9}\u{1F600}/\u{10FFFF}",
        "...",
        ".../..a/a..",
        "trailing#",
        "name#12a",
        "#1/b",
        "c|/v",
        "c:/v",
        "a/b:",
        "x|",
        "t/2026-11-25T01:02:03",
    ];
    // Right below a root of `/`, the URL reads `c|` as a drive letter.
    let slash = ConfinedDir::new(std::path::Path::new("/")).unwrap();
    for (dir, key) in keys.iter().flat_map(|k| [(&dir, k), (&slash, k)]) {
        for location in [Path::from(*key), Path::parse(key).unwrap()] {
            let fast = dir.file_path(&location).unwrap();
            if let Some(direct) = dir.key_path(location.as_ref()) {
                assert_eq!(direct.unwrap().as_os_str(), fast.as_os_str(), "{key}");
            }
            // Byte for byte: `PathBuf`'s `==` ignores a trailing slash.
            assert_eq!(
                fast.as_os_str(),
                dir.inner.path_to_filesystem(&location).unwrap().as_os_str(),
                "{key}"
            );
            let rel = dir.relative(&fast).unwrap();
            assert_eq!(rel, fast.strip_prefix(&dir.root).unwrap(), "{key}");
        }
    }
    assert!(dir.file_path(&Path::parse("a/v#1").unwrap()).is_err());
    assert!(matches!(dir.key_path("a/v#1"), Some(Err(_))));
    for key in ["", "a//b", "a/./b", "a/../b"] {
        assert!(dir.key_path(key).is_none(), "{key}");
    }
    // Outside the root, or the root itself: refused as before.
    assert!(dir.relative(std::path::Path::new("/elsewhere/a")).is_err());
    let mut sibling = dir.root.as_os_str().to_owned();
    sibling.push("x/a");
    assert!(dir.relative(std::path::Path::new(&sibling)).is_err());
}

#[test]
fn opens_at_once_answer_as_the_pool_would_and_follow_no_link() {
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("secret"), "secret").unwrap();
    let root = tempfile::tempdir().unwrap();
    std::fs::create_dir(root.path().join("a")).unwrap();
    std::fs::write(root.path().join("a/v"), "value").unwrap();
    std::os::unix::fs::symlink(outside.path().join("secret"), root.path().join("link")).unwrap();
    std::os::unix::fs::symlink(root.path().join("a"), root.path().join("alias")).unwrap();
    let dir = ConfinedDir::new(root.path()).unwrap();
    if !opens_at_once(&dir) {
        return;
    }
    let path = |key: &str| dir.file_path(&Path::from(key)).unwrap();

    // Looked up once (as the pool's open does), then answered at once.
    assert_eq!(
        read_all(dir.open_read(&path("a/v")).unwrap().unwrap()),
        "value"
    );
    match dir.open_read_at_once(&path("a/v")).unwrap() {
        Attempt::Done(Some(f)) => assert_eq!(read_all(f), "value"),
        other => panic!("a cached file was not opened at once: {other:?}"),
    }
    assert!(dir.open_read(&path("a/nothing")).unwrap().is_none());
    assert!(matches!(
        dir.open_read_at_once(&path("a/nothing")).unwrap(),
        Attempt::Done(None)
    ));
    // Through a file: missing for the pool, and not opened at once.
    assert!(dir.open_read(&path("a/v/below")).unwrap().is_none());
    assert!(!matches!(
        dir.open_read_at_once(&path("a/v/below")).unwrap(),
        Attempt::Done(Some(_))
    ));
    // Links are never opened at once; the pool's open refuses them.
    for linked in ["link", "alias/v"] {
        assert!(dir.open_read(&path(linked)).is_err(), "{linked}");
        assert!(
            matches!(
                dir.open_read_at_once(&path(linked)).unwrap(),
                Attempt::WouldBlock
            ),
            "{linked}"
        );
    }
    assert!(dir.open_read_at_once(&root.path().join("a/v#1")).is_err());
}
