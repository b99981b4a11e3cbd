"""What the tests share: paths, repository builders, fake and local servers, CEL and CRD checkers."""
