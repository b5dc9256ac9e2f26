//! `#[derive(Tree)]`: a struct of tensors as a tree (JAX's pytree), so it
//! can be a function's argument or result and come back from `grad` in the
//! same structure.
//!
//! A struct generic over its leaf type, `Mlp<T>` with fields `T`, `Vec<T>`,
//! `Option<T>`, other trees..., gets `Flatten<L>` and `Tree<L>` for every
//! leaf type its fields allow and `Traced` (so `Mlp<Var>` is traced and
//! `Mlp<Tensor>` is what a call returns). A struct without type parameters
//! gets `Flatten` and `Tree` only (a tree of tensors passed to a call, say).
//! Fields flatten in declaration order; tuple structs by position.
//!
//! The generated code names the library as `::anvil::core`; a crate that
//! depends on `anvil-core` directly writes `#[tree(crate = "anvil_core")]`.
//!
//! ```ignore
//! #[derive(Clone, Debug, anvil::Tree)]
//! struct Mlp<T> {
//!     w: Vec<T>,
//!     b: Vec<T>,
//! }
//! ```

// Doctests are compiled with warnings as errors: an example that warns is a bad example.
#![doc(test(attr(deny(warnings))))]
use proc_macro::TokenStream;
use proc_macro2::{Span, TokenStream as Tokens};
use quote::{format_ident, quote};
use syn::{parse_macro_input, parse_quote, Data, DeriveInput, Fields, GenericParam, Ident, Index};

/// Implements `Flatten`, `Tree` and (for a struct with type parameters)
/// `Traced` for a struct; see the crate documentation.
#[proc_macro_derive(Tree, attributes(tree))]
pub fn derive_tree(input: TokenStream) -> TokenStream {
    let input = parse_macro_input!(input as DeriveInput);
    match expand(&input) {
        Ok(t) => t.into(),
        Err(e) => e.to_compile_error().into(),
    }
}

fn crate_path(input: &DeriveInput) -> syn::Result<syn::Path> {
    let mut path: syn::Path = parse_quote!(::anvil::core);
    for attr in input.attrs.iter().filter(|a| a.path().is_ident("tree")) {
        attr.parse_nested_meta(|meta| {
            if meta.path.is_ident("crate") {
                let s: syn::LitStr = meta.value()?.parse()?;
                path = s.parse()?;
                Ok(())
            } else {
                Err(meta.error("expected `crate = \"path\"`"))
            }
        })?;
    }
    Ok(path)
}

fn expand(input: &DeriveInput) -> syn::Result<Tokens> {
    let krate = crate_path(input)?;
    let name = &input.ident;
    let name_str = name.to_string();
    let fields = match &input.data {
        Data::Struct(s) => &s.fields,
        _ => {
            return Err(syn::Error::new_spanned(
                name,
                "#[derive(Tree)] supports structs (an enum's variant is not a fixed structure)",
            ))
        }
    };
    let (members, names, types): (Vec<Tokens>, Vec<String>, Vec<&syn::Type>) = match fields {
        Fields::Named(f) => f
            .named
            .iter()
            .map(|f| {
                let id = f.ident.as_ref().expect("named field");
                (quote!(#id), id.to_string(), &f.ty)
            })
            .fold((vec![], vec![], vec![]), unzip3),
        Fields::Unnamed(f) => f
            .unnamed
            .iter()
            .enumerate()
            .map(|(i, f)| {
                let idx = Index::from(i);
                (quote!(#idx), i.to_string(), &f.ty)
            })
            .fold((vec![], vec![], vec![]), unzip3),
        Fields::Unit => (vec![], vec![], vec![]),
    };
    let leaf = Ident::new("__AnvilLeaf", Span::call_site());
    let tree = quote!(#krate::tree);

    let (_, ty_generics, _) = input.generics.split_for_impl();
    let mut with_leaf = input.generics.clone();
    with_leaf.params.insert(0, parse_quote!(#leaf));
    let (impl_generics, _, _) = with_leaf.split_for_impl();
    let base_where = input.generics.where_clause.as_ref().map(|w| &w.predicates);
    let base_where: Vec<_> = base_where.into_iter().flatten().collect();

    let defs = members
        .iter()
        .zip(&names)
        .map(|(m, n)| quote!((#n, #tree::Flatten::<#leaf>::def(&self.#m))));
    let visits =
        members.iter().map(|m| quote!(#tree::Flatten::<#leaf>::for_each_leaf(&self.#m, f);));
    let rebuild =
        members.iter().zip(&types).enumerate().map(
            |(i, (m, t))| quote!(#m: <#t as #tree::Tree<#leaf>>::unflatten(fields[#i], leaves)?),
        );
    let name_list = names.iter();
    let flatten_bounds = types.iter().map(|t| quote!(#t: #tree::Flatten<#leaf>));
    let tree_bounds = types.iter().map(|t| quote!(#t: #tree::Tree<#leaf>));

    let mut out = quote! {
        #[automatically_derived]
        impl #impl_generics #tree::Flatten<#leaf> for #name #ty_generics
        where #(#base_where,)* #(#flatten_bounds,)*
        {
            fn def(&self) -> #tree::TreeDef {
                #tree::TreeDef::Struct(#name_str, ::std::vec![#(#defs),*])
            }
            #[allow(unused_variables)]
            fn for_each_leaf(&self, f: &mut dyn FnMut(&#leaf)) {
                #(#visits)*
            }
        }

        #[automatically_derived]
        impl #impl_generics #tree::Tree<#leaf> for #name #ty_generics
        where #(#base_where,)* #(#tree_bounds,)*
        {
            #[allow(unused_variables)]
            fn unflatten(
                def: &#tree::TreeDef,
                leaves: &mut dyn ::std::iter::Iterator<Item = #leaf>,
            ) -> #krate::Result<Self> {
                let fields = #tree::struct_fields(def, #name_str, &[#(#name_list),*])?;
                ::std::result::Result::Ok(#name { #(#rebuild),* })
            }
        }
    };

    let type_params: Vec<&Ident> = input
        .generics
        .params
        .iter()
        .filter_map(|p| match p {
            GenericParam::Type(t) => Some(&t.ident),
            _ => None,
        })
        .collect();
    if !type_params.is_empty() {
        let (impl_generics, _, _) = input.generics.split_for_impl();
        let nest = format_ident!("__AnvilNest");
        let concrete_args = input
            .generics
            .params
            .iter()
            .map(|p| match p {
                GenericParam::Type(t) => {
                    let id = &t.ident;
                    quote!(<#id as #tree::Traced>::Concrete)
                }
                GenericParam::Lifetime(l) => {
                    let l = &l.lifetime;
                    quote!(#l)
                }
                GenericParam::Const(c) => {
                    let id = &c.ident;
                    quote!(#id)
                }
            })
            .collect::<Vec<_>>();
        let nest_args = input.generics.params.iter().map(|p| match p {
            GenericParam::Type(t) => {
                let id = &t.ident;
                quote!(<#id as #tree::Traced>::Nest<#nest>)
            }
            GenericParam::Lifetime(l) => {
                let l = &l.lifetime;
                quote!(#l)
            }
            GenericParam::Const(c) => {
                let id = &c.ident;
                quote!(#id)
            }
        });
        let traced_bounds = type_params.iter().map(|p| quote!(#p: #tree::Traced));
        out.extend(quote! {
            #[automatically_derived]
            impl #impl_generics #tree::Traced for #name #ty_generics
            where
                #(#base_where,)*
                #(#traced_bounds,)*
                Self: #tree::Tree<#krate::Var>,
                #name<#(#concrete_args),*>: #tree::Tree<#krate::Tensor>,
            {
                type Concrete = #name<#(#concrete_args),*>;
                type Nest<#nest: #tree::Traced> = #name<#(#nest_args),*>;
            }
        });
    }
    Ok(out)
}

fn unzip3<A, B, C>(mut acc: (Vec<A>, Vec<B>, Vec<C>), x: (A, B, C)) -> (Vec<A>, Vec<B>, Vec<C>) {
    acc.0.push(x.0);
    acc.1.push(x.1);
    acc.2.push(x.2);
    acc
}
