// Wrapper module that pins NVIDIA's mig-parted (github.com/NVIDIA/mig-parted v0.15.1: the
// newest release the Go module proxy serves) for its data, not a binary: tools/build mig-parted
// downloads the module (checked against go.sum) and keeps its deployments/systemd/config-default.yaml,
// the upstream MIG table gpugov's catalog is tested against (tests/unit/test_catalog.py).
module gpugov.local/tools/mig-parted

go 1.26.0

require github.com/NVIDIA/mig-parted v0.15.1
