package safehttp_test

import (
	"errors"
	"net/netip"
	"strings"
	"testing"

	"github.com/workflowchat/service/shared/safehttp"
)

func TestCheckAddr(t *testing.T) {
	t.Parallel()
	tests := []struct {
		addr   string
		reason string // "" means allowed
	}{
		// Public unicast: allowed.
		{"8.8.8.8", ""},
		{"1.1.1.1", ""},
		{"93.184.216.34", ""},
		{"2606:4700::1", ""},
		{"2a00:1450:4001:80b::200e", ""},
		{"::ffff:8.8.8.8", ""},               // IPv4-mapped public
		{"64:ff9b::808:808", ""},             // NAT64 of 8.8.8.8
		{"2002:808:808::1", ""},              // 6to4 of 8.8.8.8
		{"172.15.255.255", ""},               // just below 172.16/12
		{"172.32.0.0", ""},                   // just above 172.16/12
		{"100.63.255.255", ""},               // just below 100.64/10
		{"100.128.0.0", ""},                  // just above 100.64/10
		{"169.253.255.255", ""},              // just below 169.254/16
		{"192.169.0.1", ""},                  // just above 192.168/16
		{"11.0.0.1", ""},                     // just above 10/8
		{"126.255.255.255", ""},              // just below 127/8
		{"223.255.255.255", ""},              // just below multicast
		{"fbff:ffff::1", "outside 2000::/3"}, // IPv6 outside global unicast space
		{"4000::1", "outside 2000::/3"},
		// Loopback.
		{"127.0.0.1", "loopback"},
		{"127.1.2.3", "loopback"},
		{"::1", "loopback"},
		// Private.
		{"10.0.0.1", "private"},
		{"10.255.255.255", "private"},
		{"172.16.0.1", "private"},
		{"172.31.255.255", "private"},
		{"192.168.1.1", "private"},
		{"fc00::1", "private"},
		{"fd00:ec2::254", "private"}, // AWS IMDS over IPv6
		// Link-local, the metadata service above all.
		{"169.254.169.254", "link-local"},
		{"169.254.0.1", "link-local"},
		{"fe80::1", "link-local"},
		{"fe80::1%eth0", "link-local"},
		// Unspecified.
		{"0.0.0.0", "unspecified"},
		{"0.1.2.3", "unspecified"},
		{"::", "unspecified"},
		// Multicast and broadcast.
		{"224.0.0.1", "multicast"},
		{"239.255.255.250", "multicast"},
		{"ff02::1", "multicast"},
		{"255.255.255.255", "reserved"},
		// CGNAT.
		{"100.64.0.1", "CGNAT"},
		{"100.127.255.255", "CGNAT"},
		// Reserved and documentation ranges, Oracle's metadata address.
		{"192.0.0.192", "reserved"},
		{"192.0.2.1", "documentation"},
		{"198.18.0.1", "benchmarking"},
		{"2001:db8::1", "documentation"},
		// IPv6 forms embedding a refused IPv4 address.
		{"::ffff:127.0.0.1", "loopback"},
		{"::ffff:169.254.169.254", "link-local"},
		{"::ffff:10.0.0.1", "private"},
		{"::ffff:100.64.0.1", "CGNAT"},
		{"::ffff:0.0.0.0", "unspecified"},
		{"64:ff9b::a00:1", "private"},        // NAT64 of 10.0.0.1
		{"64:ff9b::a9fe:a9fe", "link-local"}, // NAT64 of 169.254.169.254
		{"2002:7f00:1::1", "loopback"},       // 6to4 of 127.0.0.1
		{"::127.0.0.1", "IPv4-compatible"},
	}
	for _, tt := range tests {
		t.Run(tt.addr, func(t *testing.T) {
			t.Parallel()
			ip := netip.MustParseAddr(tt.addr)
			err := safehttp.CheckAddr(ip)
			if tt.reason == "" {
				if err != nil {
					t.Fatalf("CheckAddr(%s) = %v, want allowed", tt.addr, err)
				}
				return
			}
			if err == nil {
				t.Fatalf("CheckAddr(%s) = nil, want refused (%s)", tt.addr, tt.reason)
			}
			if !errors.Is(err, safehttp.ErrForbiddenAddress) {
				t.Errorf("CheckAddr(%s) = %v, does not wrap ErrForbiddenAddress", tt.addr, err)
			}
			if !strings.Contains(err.Error(), tt.reason) {
				t.Errorf("CheckAddr(%s) = %q, want reason containing %q", tt.addr, err, tt.reason)
			}
			var ae *safehttp.AddressError
			if !errors.As(err, &ae) || !ae.Addr.IsValid() {
				t.Errorf("CheckAddr(%s) = %#v, want *AddressError with the address", tt.addr, err)
			}
		})
	}
}

func TestCheckAddrInvalid(t *testing.T) {
	t.Parallel()
	if err := safehttp.CheckAddr(netip.Addr{}); !errors.Is(err, safehttp.ErrForbiddenAddress) {
		t.Fatalf("CheckAddr(zero) = %v, want ErrForbiddenAddress", err)
	}
}
