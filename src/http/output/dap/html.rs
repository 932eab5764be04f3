//! The OPeNDAP form page (`.html`): the dataset's variables with their
//! dimensions and attributes, and a form that builds a constraint and
//! asks for an answer in any of the DAP forms.

use std::fmt::Write;

use super::{attributes, Dataset, Version};
use crate::http::output::xml::escape;

/// The page of `dataset`, whose answers are at `base` + suffix.
pub fn page(dataset: &Dataset, base: &str) -> String {
    let name = escape(&dataset.name);
    // In the script, a JSON string (no markup can close it).
    let js_base = serde_json::to_string(base)
        .unwrap_or_default()
        .replace('<', "\\u003c");
    let base = escape(base);
    let mut s = String::new();
    let _ = write!(
        s,
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <title>OPeNDAP: {name}</title>\
         <style>body{{font:14px system-ui,sans-serif;margin:2em;max-width:70em}}\
         table{{border-collapse:collapse}}td,th{{border:1px solid #ccc;padding:4px 8px;text-align:left;vertical-align:top}}\
         code,input[type=text]{{font-family:ui-monospace,monospace}}</style></head><body>\
         <h1>{name}</h1>\
         <p>Metadata: <a href=\"{base}.dds\">DDS</a> · <a href=\"{base}.das\">DAS</a> · \
         <a href=\"{base}.dmr\">DMR</a></p>\
         <form id=\"ask\"><table><tr><th></th><th>variable</th><th>type</th><th>hyperslab</th><th>attributes</th></tr>"
    );
    for (v, ty) in &dataset.vars {
        let vname = escape(&v.name);
        let dims: Vec<String> = v
            .dimensions
            .iter()
            .zip(&v.shape)
            .map(|(d, n)| format!("{} = {n}", escape(d)))
            .collect();
        let slab: String = v
            .shape
            .iter()
            .map(|n| format!("[0:1:{}]", n.saturating_sub(1)))
            .collect();
        let attrs: Vec<String> = attributes(&v.attributes, Some(*ty), Version::Dap4)
            .iter()
            .map(|a| format!("{}: {}", escape(&a.name), escape(&a.values.join(", "))))
            .collect();
        let _ = write!(
            s,
            "<tr><td><input type=\"checkbox\" name=\"var\" value=\"{vname}\"></td>\
             <td><code>{vname}</code> [{}]</td><td>{}</td>\
             <td><input type=\"text\" size=\"30\" data-var=\"{vname}\" value=\"{}\"></td><td>{}</td></tr>",
            dims.join(", "),
            ty.name(Version::Dap4),
            escape(&slab),
            attrs.join("<br>")
        );
    }
    let _ = write!(
        s,
        "</table><p>Answer as <select id=\"as\"><option value=\"ascii\">ASCII</option>\
         <option value=\"dods\">DAP2 binary (.dods)</option><option value=\"dap\">DAP4 binary (.dap)</option>\
         <option value=\"dds\">DDS</option></select> <button>Get</button></p>\
         <p>URL: <code id=\"url\"></code></p></form>"
    );
    if !dataset.left_out.is_empty() {
        s.push_str("<p>Not served:</p><ul>");
        for (n, why) in &dataset.left_out {
            let _ = write!(s, "<li><code>{}</code>: {}</li>", escape(n), escape(why));
        }
        s.push_str("</ul>");
    }
    let global: Vec<String> = attributes(&dataset.attributes, None, Version::Dap4)
        .iter()
        .map(|a| {
            format!(
                "<li>{}: {}</li>",
                escape(&a.name),
                escape(&a.values.join(", "))
            )
        })
        .collect();
    if !global.is_empty() {
        let _ = write!(s, "<h2>Global attributes</h2><ul>{}</ul>", global.join(""));
    }
    let _ = writeln!(
        s,
        "<script>\
         const f=document.getElementById('ask');\
         function url(){{const as=document.getElementById('as').value;\
         const picked=[...f.querySelectorAll('input[name=var]:checked')].map(c=>\
         c.value+f.querySelector('input[data-var=\"'+CSS.escape(c.value)+'\"]').value);\
         if(as==='dap'){{return {js_base}+'.dap'+(picked.length?'?dap4.ce='+encodeURIComponent(picked.map(p=>'/'+p).join(';')):'');}}\
         return {js_base}+'.'+as+(picked.length?'?'+picked.join(','):'');}}\
         f.addEventListener('input',()=>{{document.getElementById('url').textContent=url();}});\
         f.addEventListener('submit',e=>{{e.preventDefault();location.href=url();}});\
         document.getElementById('url').textContent=url();\
         </script></body></html>"
    );
    s
}
