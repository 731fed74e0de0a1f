package fmha

// The run-time version check (CheckLibraryVersion). VersionCompatible's rule
// is tested with made-up numbers; TestEntryPointsRefuseAnotherRelease re-runs
// this test binary with an LD_PRELOAD shim whose fmha_version() reports
// another release, so every entry point's check (or lack of one) meets the
// real library.

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

const (
	shimVersionEnv = "FMHA_SHIM_VERSION" // the version the shim reports, in a child
	shimExpectEnv  = "FMHA_SHIM_EXPECT"  // the refused version as printed, or "" where it is accepted
)

func TestVersionCompatible(t *testing.T) {
	accepted := []struct{ found, major, minor uint32 }{
		{100, 0, 1},   // 0.1.0 for the 0.1 header
		{107, 0, 1},   // patch releases keep the layouts
		{10000, 1, 0}, // from 1.0 on only the major version must match
		{10300, 1, 0},
		{10000, 1, 2},
	}
	for _, c := range accepted {
		if err := VersionCompatible(c.found, c.major, c.minor); err != nil {
			t.Errorf("VersionCompatible(%d, %d, %d) = %v, want nil", c.found, c.major, c.minor, err)
		}
	}
	refused := []struct {
		found, major, minor uint32
		want                []string
	}{
		{200, 0, 1, []string{"libfmha is 0.2.0", "libfmha 0.1 and needs libfmha 0.1.x", "before 1.0"}},
		{3, 0, 1, []string{"libfmha is 0.0.3", "needs libfmha 0.1.x"}},
		{9999, 0, 1, []string{"libfmha is 0.99.99", "needs libfmha 0.1.x"}},
		{10100, 0, 1, []string{"libfmha is 1.1.0", "libfmha 0.1 and needs libfmha 0.x"}},
		{20001, 1, 4, []string{"libfmha is 2.0.1", "libfmha 1.4 and needs libfmha 1.x"}},
		{0, 1, 0, []string{"libfmha is 0.0.0", "needs libfmha 1.x"}},
	}
	for _, c := range refused {
		err := VersionCompatible(c.found, c.major, c.minor)
		if !errors.Is(err, ErrVersionMismatch) {
			t.Errorf("VersionCompatible(%d, %d, %d) = %v, want ErrVersionMismatch", c.found, c.major, c.minor, err)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("VersionCompatible(%d, %d, %d): %q does not say %q", c.found, c.major, c.minor, err, w)
			}
		}
	}
}

func TestCheckLibraryVersion(t *testing.T) {
	if os.Getenv(shimVersionEnv) != "" {
		t.Skip("in a child of TestEntryPointsRefuseAnotherRelease")
	}
	if err := CheckLibraryVersion(); err != nil {
		t.Fatalf("the loaded library (%s) against the %d.%d header: %v", VersionString(), VersionMajor, VersionMinor, err)
	}
}

// buildVersionShim compiles fmha_version() returning $FMHA_SHIM_VERSION. It
// has no symbol versions, so the loader lets it stand in for libfmha's
// versioned fmha_version.
func buildVersionShim(t *testing.T) string {
	dir := t.TempDir()
	src := filepath.Join(dir, "version_shim.c")
	lib := filepath.Join(dir, "libfmha_version_shim.so")
	code := "#include <stdint.h>\n#include <stdlib.h>\n" +
		"uint32_t fmha_version(void) { return (uint32_t)strtoul(getenv(\"" + shimVersionEnv + "\"), 0, 10); }\n"
	if err := os.WriteFile(src, []byte(code), 0o644); err != nil {
		t.Fatal(err)
	}
	cc := os.Getenv("CC")
	if cc == "" {
		cc = "cc"
	}
	if out, err := exec.Command(cc, "-shared", "-fPIC", "-o", lib, src).CombinedOutput(); err != nil {
		t.Fatalf("building the version shim with %s: %v\n%s", cc, err, out)
	}
	return lib
}

func TestEntryPointsRefuseAnotherRelease(t *testing.T) {
	if os.Getenv(shimVersionEnv) != "" {
		t.Skip("in a child of TestEntryPointsRefuseAnotherRelease")
	}
	shim := buildVersionShim(t)
	for _, c := range []struct {
		version uint32
		refused string // as the message prints it; "" where it is accepted
	}{
		{200, "0.2.0"},          // another minor release before 1.0
		{10100, "1.1.0"},        // another major release
		{VersionNumber + 7, ""}, // a patch release
	} {
		cmd := exec.Command(os.Args[0], "-test.run", "^TestVersionShimChild$", "-test.v", "-test.count=1")
		cmd.Env = append(os.Environ(), "LD_PRELOAD="+shim,
			fmt.Sprintf("%s=%d", shimVersionEnv, c.version), shimExpectEnv+"="+c.refused)
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), "--- PASS: TestVersionShimChild") {
			t.Errorf("child with library version %d: %v\n%s", c.version, err, out)
		}
	}
}

// TestVersionShimChild runs only in the children of
// TestEntryPointsRefuseAnotherRelease.
func TestVersionShimChild(t *testing.T) {
	reported := os.Getenv(shimVersionEnv)
	if reported == "" {
		t.Skip("runs only in a child of TestEntryPointsRefuseAnotherRelease")
	}
	if got := fmt.Sprint(Version()); got != reported {
		t.Fatalf("the shim did not replace fmha_version: Version() = %s, want %s", got, reported)
	}
	refused := os.Getenv(shimExpectEnv)
	if refused == "" {
		if err := CheckLibraryVersion(); err != nil {
			t.Fatalf("a patch release must be accepted: %v", err)
		}
		if _, err := NewDescriptor(); err != nil {
			t.Fatalf("NewDescriptor: %v", err)
		}
		return
	}
	// Throwaway arguments the library would reject anyway (no driver needed):
	// only the version check may answer.
	desc := &Descriptor{Version: DescriptorVersion}
	merge := &MergeDescriptor{Version: MergeDescriptorVersion}
	mirrored := fmt.Sprintf("libfmha %d.%d", VersionMajor, VersionMinor)
	for _, c := range []struct {
		name string
		call func() error
	}{
		{"NewDescriptor", func() error { _, err := NewDescriptor(); return err }},
		{"ContiguousStrides", func() error { _, err := ContiguousStrides(LayoutBSHD, 16, 2, 64); return err }},
		{"Descriptor.SetContiguous", func() error { return desc.SetContiguous(LayoutBSHD) }},
		{"CheckSupport", func() error { return CheckSupport(desc, SMAny) }},
		{"NewPlan", func() error {
			p, err := NewPlan(desc)
			if p != nil {
				p.Close()
			}
			return err
		}},
		{"CheckBlockTable", func() error { return CheckBlockTable(desc, nil, nil) }},
		{"NewMergeDescriptor", func() error { _, err := NewMergeDescriptor(); return err }},
		{"NewMergePlan", func() error {
			p, err := NewMergePlan(merge)
			if p != nil {
				p.Close()
			}
			return err
		}},
		{"CheckLibraryVersion", CheckLibraryVersion},
	} {
		err := c.call()
		if !errors.Is(err, ErrVersionMismatch) {
			t.Errorf("%s: want ErrVersionMismatch, got %v", c.name, err)
			continue
		}
		if msg := err.Error(); !strings.Contains(msg, "libfmha is "+refused) || !strings.Contains(msg, mirrored) {
			t.Errorf("%s: %q does not name both versions (%s, %s)", c.name, msg, refused, mirrored)
		}
	}
}
