//! Well-known text, as EDR's `coords` takes it: POINT, LINESTRING,
//! POLYGON and MULTIPOLYGON (a Z or M suffix read and its extra ordinates
//! ignored), at most 100,000 coordinates and four levels of parentheses.

#[derive(Debug, PartialEq)]
pub enum Geometry {
    Point(f64, f64),
    Line(Vec<(f64, f64)>),
    /// Every ring of every polygon.
    Polygons(Vec<Vec<(f64, f64)>>),
}

/// Parenthesised lists, down to coordinate tuples.
#[derive(Debug)]
enum Tree {
    Tuple(Vec<f64>),
    List(Vec<Tree>),
}

/// The most coordinates a geometry may hold.
const MAX_POINTS: usize = 100_000;

pub fn parse(text: &str) -> Result<Geometry, String> {
    let t = text.trim();
    let open = t
        .find('(')
        .ok_or_else(|| format!("'{t}' is not WKT (TYPE(x y ...))"))?;
    let kind = t[..open].trim().to_ascii_uppercase();
    let kind = kind
        .trim_end_matches(" Z")
        .trim_end_matches(" M")
        .trim_end_matches(" ZM");
    let mut count = 0;
    let (tree, rest) = list(&t[open..], &mut count, 0)?;
    if !rest.trim().is_empty() {
        return Err(format!("'{}' follows the geometry", rest.trim()));
    }
    let tuples = |tree: &Tree| -> Result<Vec<(f64, f64)>, String> {
        match tree {
            Tree::List(items) => items
                .iter()
                .map(|i| match i {
                    Tree::Tuple(v) if v.len() >= 2 => Ok((v[0], v[1])),
                    _ => Err("a coordinate is not 'x y'".to_string()),
                })
                .collect(),
            Tree::Tuple(v) if v.len() >= 2 => Ok(vec![(v[0], v[1])]),
            Tree::Tuple(_) => Err("a coordinate is not 'x y'".into()),
        }
    };
    let ring = |tree: &Tree| -> Result<Vec<(f64, f64)>, String> {
        let r = tuples(tree)?;
        if r.len() < 3 {
            return Err("a ring has fewer than three points".into());
        }
        Ok(r)
    };
    match kind {
        "POINT" => match tuples(&tree)?.as_slice() {
            [p] => Ok(Geometry::Point(p.0, p.1)),
            _ => Err("a POINT is one 'x y'".into()),
        },
        "LINESTRING" => {
            let points = tuples(&tree)?;
            if points.len() < 2 {
                return Err("a LINESTRING has two points at least".into());
            }
            Ok(Geometry::Line(points))
        }
        "POLYGON" => Ok(Geometry::Polygons(
            items(&tree).into_iter().map(ring).collect::<Result<_, _>>()?,
        )),
        "MULTIPOLYGON" => {
            let mut rings = Vec::new();
            for polygon in items(&tree) {
                for r in items(polygon) {
                    rings.push(ring(r)?);
                }
            }
            Ok(Geometry::Polygons(rings))
        }
        other => Err(format!(
            "'{other}' is not a geometry EDR queries take (POINT, LINESTRING, POLYGON, MULTIPOLYGON)"
        )),
    }
}

fn items(tree: &Tree) -> Vec<&Tree> {
    match tree {
        Tree::List(items) => items.iter().collect(),
        t => vec![t],
    }
}

/// `( item, item, ... )` where an item is a list or numbers.
fn list<'a>(s: &'a str, count: &mut usize, depth: usize) -> Result<(Tree, &'a str), String> {
    if depth > 4 {
        return Err("too deeply nested".into());
    }
    let mut rest = s.trim_start().strip_prefix('(').ok_or("a '(' is missing")?;
    let mut items = Vec::new();
    loop {
        rest = rest.trim_start();
        if rest.starts_with('(') {
            let (t, r) = list(rest, count, depth + 1)?;
            items.push(t);
            rest = r;
        } else {
            let end = rest.find([',', ')']).ok_or("a ')' is missing")?;
            let numbers: Vec<f64> = rest[..end]
                .split_whitespace()
                .map(|n| n.parse::<f64>().ok().filter(|x| x.is_finite()))
                .collect::<Option<_>>()
                .ok_or_else(|| format!("'{}' is not numbers", rest[..end].trim()))?;
            *count += 1;
            if *count > MAX_POINTS {
                return Err(format!("more than {MAX_POINTS} coordinates"));
            }
            items.push(Tree::Tuple(numbers));
            rest = &rest[end..];
        }
        rest = rest.trim_start();
        if let Some(r) = rest.strip_prefix(',') {
            rest = r;
        } else if let Some(r) = rest.strip_prefix(')') {
            return Ok((Tree::List(items), r));
        } else {
            return Err("a ',' or ')' is missing".into());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn geometries() {
        assert_eq!(parse("POINT(10 20)").unwrap(), Geometry::Point(10.0, 20.0));
        assert_eq!(
            parse("point (10.5 -2)").unwrap(),
            Geometry::Point(10.5, -2.0)
        );
        assert!(
            matches!(parse("LINESTRING(0 0, 1 1, 2 2)").unwrap(), Geometry::Line(p) if p.len() == 3)
        );
        let Geometry::Polygons(r) =
            parse("POLYGON((0 0, 1 0, 1 1, 0 0),(0.2 0.2, 0.3 0.2, 0.3 0.3))").unwrap()
        else {
            panic!()
        };
        assert_eq!(r.len(), 2);
        let Geometry::Polygons(r) =
            parse("MULTIPOLYGON(((0 0, 1 0, 1 1, 0 0)),((5 5, 6 5, 6 6, 5 5)))").unwrap()
        else {
            panic!()
        };
        assert_eq!(r.len(), 2);
        for bad in [
            "POINT 1 2",
            "POINT(1)",
            "POINT(a b)",
            "POLYGON((0 0, 1 1))",
            "CIRCLE(0 0)",
            "POINT(1 2))",
            "POINT((((((1 2))))))",
        ] {
            assert!(parse(bad).is_err(), "{bad}");
        }
    }
}
