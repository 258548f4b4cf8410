// Package deploy_test checks the packaging under deploy/: that the container
// image built from deploy/Dockerfile serves the API as a non-root user
// (image_test.go), and that every KICI_ variable the systemd units, their
// example environment files and the Compose file set is one the component
// they configure reads (vars_test.go).
//
// The directory holds no Go code besides these tests; nothing imports it.
package deploy_test
