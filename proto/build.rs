//! Compiles `bosun/v1/*.proto` with protox (pure Rust: no protoc needed anywhere).

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let files = ["bosun/v1/handler.proto"];
    for f in files {
        println!("cargo:rerun-if-changed={f}");
    }
    let fds = protox::compile(files, ["."])?;
    tonic_prost_build::configure().build_client(true).build_server(true).compile_fds(fds)?;
    Ok(())
}
