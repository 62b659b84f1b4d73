// Command cripull pulls an image through containerd's CRI image service, as the kubelet does
// (the node images have no crictl): cripull SOCKET IMAGE. It prints the image's reference, or
// the error and exits 1.
package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/encoding/protowire"
)

// rawCodec passes protobuf messages the program encodes itself, without the CRI API's types.
type rawCodec struct{}

func (rawCodec) Marshal(v any) ([]byte, error) { return *(v.(*[]byte)), nil }

func (rawCodec) Unmarshal(data []byte, v any) error {
	*(v.(*[]byte)) = append([]byte(nil), data...)
	return nil
}

func (rawCodec) Name() string { return "proto" }

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: cripull SOCKET IMAGE")
		os.Exit(2)
	}
	if err := pull(os.Args[1], os.Args[2]); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func pull(socket, image string) error {
	conn, err := grpc.NewClient("unix://"+socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer conn.Close()
	// PullImageRequest{image: ImageSpec{image: IMAGE}}: field 1 in field 1.
	spec := protowire.AppendString(protowire.AppendTag(nil, 1, protowire.BytesType), image)
	req := protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), spec)
	var resp []byte
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := conn.Invoke(ctx, "/runtime.v1.ImageService/PullImage", &req, &resp, grpc.ForceCodec(rawCodec{})); err != nil {
		return err
	}
	// PullImageResponse{image_ref: field 1}.
	if num, typ, n := protowire.ConsumeTag(resp); n > 0 && num == 1 && typ == protowire.BytesType {
		if ref, m := protowire.ConsumeString(resp[n:]); m > 0 {
			fmt.Println(ref)
			return nil
		}
	}
	return fmt.Errorf("unexpected PullImageResponse %x", resp)
}
